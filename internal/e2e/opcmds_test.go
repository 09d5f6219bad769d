package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDrainLeavesRetryThenFlush: a drain whose only work left is a retry
// due in an hour exits at once, leaving it in inbox/ with its schedule in
// the ledger; the next drain holds it (no second attempt); spool show tells
// its story; spool flush makes it due, and the next drain takes it.
func TestDrainLeavesRetryThenFlush(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	script := writeFile(t, state, "once.sh", `#!/bin/sh
echo x >> "$1/attempts"
[ "$(wc -l < "$1/attempts")" -gt 1 ] || { echo "backend down" >&2; exit 75; }
`)
	putMessage(t, q, "a.json", orderMessage("A", "O1", 1, "1.00"))
	putMessage(t, q, "bad.json", "{")
	args := []string{"consume", q, "--exec", "sh " + shellQuote(script) + " " + shellQuote(state), "--retry-base", "1h", "--retry-cap", "1h", "--retry-jitter=false"}
	attempts := func() int {
		b, err := os.ReadFile(filepath.Join(state, "attempts"))
		if err != nil {
			return 0
		}
		return strings.Count(string(b), "\n")
	}

	r := runWithin(t, time.Minute, args...)
	if r.code != 0 || !strings.Contains(r.stdout, "waiting-retries=1 next-retry=") {
		t.Fatalf("first drain: want exit 0 and waiting-retries=1\n%s", r)
	}
	if got := names(t, q, inbox); len(got) != 1 || got[0] != "a.json" {
		t.Fatalf("inbox/ holds %q, want a.json waiting for its retry", got)
	}
	requireEmpty(t, q, processing)

	r = mustRun(t, 0, "show", q, "A")
	for _, want := range []string{"msg_id  A", "now", "inbox/a.json", "retry", "1 attempts failed", "backend down"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show A lacks %q:\n%s", want, r.stdout)
		}
	}
	var js struct {
		MsgID  *string `json:"msg_id"`
		Places []struct{ Stage, Name string }
		Retry  *struct {
			Attempts     int     `json:"attempts"`
			DueInSeconds float64 `json:"due_in_seconds"`
		}
	}
	r = mustRun(t, 0, "show", q, "a.json", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil {
		t.Fatalf("show --json: %v\n%s", err, r.stdout)
	}
	if js.MsgID == nil || *js.MsgID != "A" || len(js.Places) != 1 || js.Places[0].Stage != "inbox" || js.Retry == nil ||
		js.Retry.Attempts != 1 || js.Retry.DueInSeconds < 3000 || js.Retry.DueInSeconds > 3600 {
		t.Errorf("show a.json --json: %+v, want A in inbox/, 1 attempt, due in about an hour\n%s", js, r.stdout)
	}
	r = mustRun(t, 0, "show", q, "bad.json")
	if !strings.Contains(r.stdout, "no valid msg_id") || !strings.Contains(r.stdout, "error/bad.json") || !strings.Contains(r.stdout, "parse") {
		t.Errorf("show bad.json: want the dead letter in error/, reason parse:\n%s", r.stdout)
	}
	if r := mustRun(t, 1, "show", q, "NOPE"); !strings.Contains(r.stderr, "knows nothing") {
		t.Errorf("show of an unknown msg_id: %s", r)
	}

	r = runWithin(t, time.Minute, args...)
	if r.code != 0 || attempts() != 1 || !strings.Contains(r.stdout, "waiting-retries=1") {
		t.Fatalf("second drain: %d attempts, want 1 (held until due)\n%s", attempts(), r)
	}

	if r := mustRun(t, 1, "flush", q, "NOPE"); !strings.Contains(r.stderr, "no retry waiting for NOPE") || !strings.Contains(r.stdout, "flushed 0 retries") {
		t.Errorf("flush of an unknown msg_id: %s", r)
	}
	if r := mustRun(t, 0, "flush", q, "A"); !strings.Contains(r.stdout, "flushed 1 retries\n  A\n") {
		t.Errorf("flush A: %s", r)
	}
	r = mustRun(t, 0, args...)
	if st := parseStats(t, r); st.Processed != 1 || attempts() != 2 || strings.Contains(r.stdout, "waiting-retries") {
		t.Fatalf("drain after flush: %+v, %d attempts; want A processed at its second attempt\n%s", st, attempts(), r)
	}
	r = mustRun(t, 0, "show", q, "A")
	if !strings.Contains(r.stdout, "done/a.json") || !strings.Contains(r.stdout, "processed") || strings.Contains(r.stdout, "retry") {
		t.Errorf("show A after it was processed:\n%s", r.stdout)
	}
}
