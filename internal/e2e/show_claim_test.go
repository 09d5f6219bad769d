//go:build linux

package e2e

import (
	"encoding/json"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// A message whose handler failed transiently waits for its retry as a
// claim in processing/, and status counts it there: show says so, with
// when the retry is due, instead of "in no stage".
func TestShowClaimWaitingForRetry(t *testing.T) {
	t.Parallel()
	q, _ := workQueue(t)
	putMessage(t, q, "a.json", orderMessage("m1", "A", 1, "1.00"))
	p := start(t, "consume", q, "--watch", "--exec", "exit 75",
		"--retry-base", "1h", "--retry-cap", "1h", "--retry-jitter=false")
	db := openLedger(t, q)
	waitFor(t, time.Minute, "the failed attempt to be recorded", func() bool {
		n, ok := attemptsOf(t, db, "m1")
		return ok && n == 1
	})
	if n := countClaims(t, q); n != 1 {
		t.Fatalf("processing/ holds %d claims, want the one waiting for its retry", n)
	}

	now := regexp.MustCompile(`(?m)^now +processing/a\.json \(claimed, waiting for its retry, due \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)$`)
	for _, arg := range []string{"m1", "a.json"} {
		r := mustRun(t, 0, "show", q, arg)
		if !now.MatchString(r.stdout) {
			t.Errorf("show %s: want the claim in processing/ waiting for its retry\n%s", arg, r)
		}
	}
	var story struct {
		Places []struct{ Stage, Name string }
		Retry  *struct {
			NextAt time.Time `json:"next_at"`
		}
	}
	r := mustRun(t, 0, "show", q, "m1", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &story); err != nil {
		t.Fatal(err)
	}
	if len(story.Places) != 1 || story.Places[0].Stage != "processing" || story.Places[0].Name != "a.json" ||
		story.Retry == nil || time.Until(story.Retry.NextAt) < 50*time.Minute {
		t.Errorf("show --json: want the place processing/a.json and the retry due in about 1h\n%s", r)
	}

	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if r := p.wait(t); r.code != 0 {
		t.Fatalf("consume at SIGTERM:\n%s", r)
	}
	// Given back to inbox/ at the stop, unrecorded: show finds it there.
	if r := mustRun(t, 0, "show", q, "m1"); !regexp.MustCompile(`(?m)^now +inbox/a\.json$`).MatchString(r.stdout) {
		t.Errorf("show m1 after the stop: want inbox/a.json\n%s", r)
	}
}
