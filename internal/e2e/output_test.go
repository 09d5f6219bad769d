//go:build linux

package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReportsJSONAndTerminal: every report has --json, and its output is
// JSON; names a producer chose reach the terminal escaped (no raw
// control character in any text report or message) and survive --json
// exactly, in a _b64 key when they are not UTF-8; durations in JSON log
// records are seconds.
func TestReportsJSONAndTerminal(t *testing.T) {
	q, _ := workQueue(t)
	evil := "evil\x1b]0;pwned\a.json"
	notUTF8 := "bad\xff.json"
	for _, n := range []string{evil, notUTF8} {
		if err := os.WriteFile(filepath.Join(q, inbox, n), []byte("not json"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	putMessage(t, q, "a.json", `{"msg_id":"a","order_no":"o","seq":1,"amount":"1","x\u001b[2J":1}`)
	putMessage(t, q, "c.json", `{"msg_id":"c","order_no":"o","seq":3,"amount":"1"}`)
	r := mustRun(t, 0, "consume", q)
	putMessage(t, q, "a2.json", `{"msg_id":"a","order_no":"o","seq":1,"amount":"2"}`) // a conflict
	putMessage(t, q, "s.json", `{"msg_id":"s","order_no":"o","seq":4,"amount":"1","e\u001b]0;x\u0007":2}`)
	texts := []result{r, mustRun(t, 0, "schema", q)}
	mustRun(t, 0, "consume", q)
	for _, args := range [][]string{
		{"errors", q}, {"errors", q, "--long"}, {"errors", q, "--detail"}, {"dups", q},
		{"replays", q}, {"status", q}, {"fsck", q},
	} {
		texts = append(texts, run(t, args...))
	}
	texts = append(texts, run(t, "dups", q, "--conflicts"), run(t, "order-check", q))
	for _, r := range texts {
		out := r.stdout + r.stderr
		if strings.IndexByte(out, 0x1b) >= 0 || strings.IndexByte(out, 0x07) >= 0 || strings.IndexByte(out, 0xff) >= 0 {
			t.Errorf("raw control character or non-UTF-8 byte on the terminal:\n%q\n%q", r.args, r.stdout+r.stderr)
		}
	}
	if !strings.Contains(texts[2].stdout, `evil\x1b]0;pwned\a.json`) {
		t.Errorf("errors does not show the escaped name:\n%s", texts[2].stdout)
	}

	for _, args := range [][]string{
		{"status", q, "--json"}, {"errors", q, "--json"}, {"dups", q, "--json"}, {"dups", q, "--conflicts", "--json"},
		{"order-check", q, "--json"}, {"schema", q, "--json"}, {"lag", q, "100", "--json"}, {"replays", q, "--json"},
		{"fsck", q, "--json"},
	} {
		r := run(t, args...)
		if r.code > 1 || !json.Valid([]byte(r.stdout)) {
			t.Errorf("not JSON: %s", r)
		}
	}
	var rows []struct {
		File    string  `json:"file"`
		FileB64 *string `json:"file_b64"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "errors", q, "--json").stdout), &rows); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, r := range rows {
		name := r.File
		if r.FileB64 != nil {
			b, err := base64.StdEncoding.DecodeString(*r.FileB64)
			if err != nil {
				t.Fatal(err)
			}
			name = string(b)
		}
		names[name] = true
	}
	if !names[evil] || !names[notUTF8] {
		t.Errorf("errors --json does not give back the exact names: %v", names)
	}
	var conflicts []map[string]any
	if err := json.Unmarshal([]byte(run(t, "dups", q, "--conflicts", "--json").stdout), &conflicts); err != nil || len(conflicts) != 1 || conflicts[0]["msg_id"] != "a" {
		t.Errorf("dups --conflicts --json: %v %v", err, conflicts)
	}
	var oc struct {
		OK       bool             `json:"ok"`
		Problems []map[string]any `json:"problems"`
	}
	if r := run(t, "order-check", q, "--json"); r.code != 1 || json.Unmarshal([]byte(r.stdout), &oc) != nil || oc.OK || len(oc.Problems) == 0 {
		t.Errorf("order-check --json with seq 2 missing: %s", r)
	}

	// A JSON log record's duration is seconds, a number.
	p := start(t, "consume", q, "--watch", "--log-format", "json", "--shutdown-timeout", "90s")
	// Its session in processing/ is joined after the signals are caught:
	// a SIGTERM before would kill it (a loaded machine took over 500 ms).
	waitFor(t, cmdTimeout, "the consumer's session in processing/", func() bool {
		des, err := os.ReadDir(filepath.Join(q, "processing"))
		return err == nil && len(des) > 0
	})
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	res := p.wait(t)
	found := false
	for _, line := range bytes.Split([]byte(res.stderr), []byte("\n")) {
		var rec map[string]any
		if json.Unmarshal(line, &rec) != nil {
			continue
		}
		if v, ok := rec["shutdown_timeout"]; ok {
			found = true
			if v != 90.0 {
				t.Errorf("shutdown_timeout = %#v, want 90 (seconds)", v)
			}
		}
	}
	if !found {
		t.Errorf("no record with shutdown_timeout:\n%s", res.stderr)
	}
}
