package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
)

// TestErrorsViews: --long, --json and --group-by reason over handler
// failures, poison messages (one stored under a suffixed name) and a file
// without a record.
func TestErrorsViews(t *testing.T) {
	q := newQueue(t)
	in := filepath.Join(q, "inbox")
	write(t, filepath.Join(in, "a.json"), msg("m1", "O1", 1, `"10.00"`))
	write(t, filepath.Join(in, "b.json"), msg("m2", "O2", 1, `"20.00"`))
	write(t, filepath.Join(in, "c.json"), `{"msg_id":"m3","order_no":"O3","seq":1}`)
	drain(t, q, "m1", "m2")
	// Another c.json fails too: error/ keeps both, the newer as c~2.json.
	write(t, filepath.Join(in, "c.json"), `{"msg_id":"m4","order_no":"O4","seq":"x","amount":1}`)
	drain(t, q)
	write(t, filepath.Join(q, "error", "z.json"), "{}") // dropped by hand
	cli(t, "errors", q).want(t, 0, "file,reason\na.json,handler\nb.json,handler\nc.json,missing-field\nc~2.json,invalid-field\nz.json,unknown\n")

	// JSON: every field, parsed back.
	r := cli(t, "errors", q, "--json")
	var objs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &objs); r.code != 0 || err != nil || len(objs) != 5 {
		t.Fatalf("errors --json: exit %d, %v:\n%s", r.code, err, r.stdout)
	}
	byFile := map[string]map[string]any{}
	for _, o := range objs {
		byFile[o["file"].(string)] = o
	}
	a, c2, z := byFile["a.json"], byFile["c~2.json"], byFile["z.json"]
	host, _ := a["consumer_host"].(string)
	if a["reason"] != "handler" || a["detail"] != "order O1 is closed" || a["msg_id"] != "m1" ||
		a["attempts"] != 1.0 || a["consumer_pid"] != float64(os.Getpid()) || host == "" ||
		a["original_file"] != "a.json" || a["replays"] != 0.0 || a["previous_failures"] != 0.0 {
		t.Errorf("a.json = %v", a)
	}
	for _, key := range []string{"first_failure", "last_failure", "at"} {
		s, _ := a[key].(string)
		if _, err := time.Parse(ledger.TimeLayout, s); err != nil {
			t.Errorf("a.json %s = %v: %v", key, a[key], err)
		}
	}
	if c2["reason"] != "invalid-field" || c2["field"] != "seq" || c2["original_file"] != "c.json" ||
		c2["msg_id"] != "m4" || c2["attempts"] != 1.0 || c2["first_failure"] != c2["at"] {
		t.Errorf("c~2.json = %v", c2)
	}
	if z["reason"] != "unknown" || z["original_file"] != nil || z["attempts"] != 0.0 || z["consumer"] != nil ||
		z["first_failure"] != nil {
		t.Errorf("z.json = %v", z)
	}
	wantKeys := "at attempts consumer consumer_host consumer_pid detail field file first_failure history ino " +
		"last_failure msg_id original_file previous_failures reason replays"
	for _, o := range objs {
		if got := strings.Join(slices.Sorted(maps.Keys(o)), " "); got != wantKeys {
			t.Errorf("%v keys = %s, want %s", o["file"], got, wantKeys)
		}
	}

	// The table: one line a file, host:pid, the original name when it
	// differs, the field before the detail.
	r = cli(t, "errors", q, "--long")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 6 {
		t.Fatalf("errors --long: exit %d:\n%s", r.code, r.stdout)
	}
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "FILE REASON ATTEMPTS FIRST FAILURE LAST FAILURE CONSUMER ORIGINAL REPLAYS PREVIOUS DETAIL" {
		t.Errorf("header %q", lines[0])
	}
	me := host + ":" + strconv.Itoa(os.Getpid())
	for i, want := range []string{
		"a.json handler 1 T T " + me + " - 0 0 order O1 is closed",
		"b.json handler 1 T T " + me + " - 0 0 order O2 is closed",
		"c.json missing-field 1 T T " + me + " - 0 0 amount: required field is missing",
		"c~2.json invalid-field 1 T T " + me + " c.json 0 0 seq:",
		"z.json unknown - - - - - 0 0 no dead-letter record in the ledger",
	} {
		f := strings.Fields(lines[i+1])
		for j := 3; j <= 4; j++ {
			if _, err := time.Parse("2006-01-02T15:04:05Z", f[j]); err == nil {
				f[j] = "T"
			}
		}
		if got := strings.Join(f, " "); !strings.HasPrefix(got, want) {
			t.Errorf("row %d = %q, want it to start with %q", i+1, got, want)
		}
	}

	// The triage view: most frequent first, then by reason; the times of
	// the unknown file are unknown.
	r = cli(t, "errors", q, "--group-by", "reason")
	lines = strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 5 || lines[0] != "reason,count,first,last" {
		t.Fatalf("errors --group-by reason: exit %d:\n%s", r.code, r.stdout)
	}
	wantFirst := map[string]string{} // reason -> the earliest first_failure in the JSON
	for _, o := range objs {
		reason, _ := o["reason"].(string)
		if s, ok := o["first_failure"].(string); ok && (wantFirst[reason] == "" || s < wantFirst[reason]) {
			wantFirst[reason] = s
		}
	}
	for i, want := range []string{"handler,2,", "invalid-field,1,", "missing-field,1,", "unknown,1,"} {
		row := strings.Split(lines[i+1], ",")
		if !strings.HasPrefix(lines[i+1], want) || len(row) != 4 {
			t.Errorf("row %d = %q, want %s...", i+1, lines[i+1], want)
			continue
		}
		if row[2] != wantFirst[row[0]] || row[3] < row[2] {
			t.Errorf("row %d = %q: first %q (want %q), last before first", i+1, lines[i+1], row[2], wantFirst[row[0]])
		}
	}

	// -o takes every view.
	out := filepath.Join(t.TempDir(), "errors.json")
	cli(t, "errors", q, "--json", "-o", out).want(t, 0, "")
	if data, err := os.ReadFile(out); err != nil || !json.Valid(data) {
		t.Errorf("-o with --json: %v, valid=%v", err, json.Valid(data))
	}
}

func TestErrorsViewsEmptyAndUsage(t *testing.T) {
	q := newQueue(t)
	cli(t, "errors", q, "--json").want(t, 0, "[]\n")
	cli(t, "errors", q, "--group-by", "reason").want(t, 0, "reason,count,first,last\n")
	cli(t, "errors", q, "--long").want(t, 0, "FILE  REASON  ATTEMPTS  FIRST FAILURE  LAST FAILURE  CONSUMER  ORIGINAL  REPLAYS  PREVIOUS  DETAIL\n")
	for _, tt := range []struct {
		args []string
		sub  string
	}{
		{[]string{"errors", q, "--long", "--json"}, "exclusive"},
		{[]string{"errors", q, "--detail", "--group-by", "reason"}, "exclusive"},
		{[]string{"errors", q, "--group-by", "file"}, `--group-by "file"`},
		{[]string{"errors", q, "--group-by"}, "--group-by needs a value"},
	} {
		cli(t, tt.args...).wantFail(t, 2, "errors", tt.sub)
	}
}
