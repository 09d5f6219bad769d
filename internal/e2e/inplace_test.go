//go:build linux

package e2e

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// inPlaceHint is what a dead letter taken from a producer still writing
// it says, in its detail and (once per burst) in the log.
const inPlaceHint = "the file was still being written? see --min-age"

// A producer that writes its files in place, under their final names, and
// a consumer without --min-age: each file is taken half-written and is a
// parse dead letter, although it is complete by the time anyone looks at
// error/. Each dead letter's detail says what probably happened; the log
// says it once for the burst, not once a file.
func TestInPlaceWriterHint(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, name := range []string{"a.json", "b.json"} {
		body := `{"msg_id":"` + name + `","order_no":"A","seq":1,"amount":"1.00","note":"` + strings.Repeat("x", 2000) + `"}`
		f, err := os.OpenFile(filepath.Join(q, inbox, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(body[:20]); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		// A slow producer: a byte every 10ms, for longer than consume
		// takes, and the rest at once when told to stop.
		go func() {
			defer wg.Done()
			defer f.Close()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for i := 20; i < len(body); i++ {
				select {
				case <-stop:
					_, _ = f.WriteString(body[i:])
					return
				case <-tick.C:
				}
				if _, err := f.WriteString(body[i : i+1]); err != nil {
					return
				}
			}
		}()
	}
	r := run(t, "consume", q, "--log-format", "json")
	close(stop)
	wg.Wait()
	if r.code != 0 {
		t.Fatalf("consume:\n%s", r)
	}
	if st := parseStats(t, r); st.DeadLetters != 2 {
		t.Fatalf("want 2 dead letters (taken half-written), got %+v\n%s", st, r)
	}

	rows, err := csv.NewReader(strings.NewReader(mustRun(t, 0, "errors", q, "--detail").stdout)).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("errors --detail: %v %q", err, rows)
	}
	for _, row := range rows[1:] {
		if row[1] != "parse" || !strings.Contains(row[3], inPlaceHint) {
			t.Errorf("dead letter %s: reason %s, detail %q: want parse, saying %q", row[0], row[1], row[3], inPlaceHint)
		}
	}
	if out := mustRun(t, 0, "show", q, "a.json").stdout; !strings.Contains(out, inPlaceHint) {
		t.Errorf("show a.json does not say %q:\n%s", inPlaceHint, out)
	}

	dead, hinted := 0, 0
	for _, line := range lines(r.stderr) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("stderr line %q is not JSON: %v", line, err)
		}
		if rec["msg"] != "dead letter" {
			continue
		}
		dead++
		if strings.Contains(rec["detail"].(string), inPlaceHint) {
			hinted++
		}
	}
	if dead != 2 || hinted != 1 {
		t.Errorf("want 2 dead-letter records, 1 of them saying %q; got %d and %d\n%s", inPlaceHint, dead, hinted, r.stderr)
	}
}

// A complete file that is no JSON object at all, enqueued the instant
// before consume takes it, is a parse dead letter like any other: the
// guess that it was still being written is for an object cut short.
func TestNotJSONIsNoInPlaceWriter(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	src := t.TempDir()
	for name, body := range map[string]string{"c.json": "not json\n", "d.json": "[1, 2]\n"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		mustRun(t, 0, "enqueue", q, filepath.Join(src, name))
	}
	mustRun(t, 0, "consume", q)
	rows, err := csv.NewReader(strings.NewReader(mustRun(t, 0, "errors", q, "--detail").stdout)).ReadAll()
	if err != nil || len(rows) != 3 {
		t.Fatalf("errors --detail: %v %q", err, rows)
	}
	for _, row := range rows[1:] {
		if row[1] != "parse" || strings.Contains(row[3], inPlaceHint) {
			t.Errorf("dead letter %s: reason %s, detail %q: want parse, without %q", row[0], row[1], row[3], inPlaceHint)
		}
	}
}
