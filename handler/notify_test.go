package handler

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
)

// TestNotifierNeverBlocks: a notifier whose command hangs never holds up
// the consumer: past its few pending slots a dead letter is skipped with a
// warning, and close gives up after its bound, killing what still runs.
func TestNotifierNeverBlocks(t *testing.T) {
	var mu sync.Mutex
	var warnings []string
	warn := func(err error) {
		mu.Lock()
		warnings = append(warnings, err.Error())
		mu.Unlock()
	}
	n := NewNotifier(NotifierOptions{Command: "sleep 30", Queue: t.TempDir(), Timeout: time.Minute, Workers: 1, Pending: 1, OnError: warn})
	start := time.Now()
	for i := range 5 {
		n.Deliver(&spool.Delivery{File: fmt.Sprint(i, ".json")},
			spool.Result{Outcome: spool.OutcomeDeadLetter, Reject: &spool.RejectError{Reason: spool.ReasonParse}}, fmt.Sprint(i, ".json"))
	}
	n.Deliver(&spool.Delivery{File: "ok.json"}, spool.Result{Outcome: spool.OutcomeProcessed}, "ok.json") // not a dead letter: ignored
	if took := time.Since(start); took > time.Second {
		t.Errorf("handing over 5 dead letters took %v", took)
	}
	if err := n.Close(200 * time.Millisecond); err != nil {
		warn(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("close took %v with a 200ms bound", took)
	}
	n.Deliver(&spool.Delivery{File: "late.json"}, spool.Result{Outcome: spool.OutcomeDeadLetter}, "late.json") // after close: dropped, no panic
	mu.Lock()
	defer mu.Unlock()
	skipped, killed := 0, 0
	for _, w := range warnings {
		switch {
		case strings.Contains(w, "not notified: 1 notifications already waiting"):
			skipped++
		case strings.Contains(w, "signal: killed"), strings.Contains(w, "notifications not run"):
			killed++
		}
	}
	if skipped < 3 || killed == 0 {
		t.Errorf("want >= 3 skipped and the running one killed, got:\n%s", strings.Join(warnings, "\n"))
	}
}
