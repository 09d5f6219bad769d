//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// waitForErrorStage polls error/ until ready holds of its entries' names,
// and returns when; false if p exits first. The crash tests aim their
// kills with it at a phase of a replay or a discard that lasts a few
// milliseconds, which an instant drawn blind rarely hits.
func waitForErrorStage(t *testing.T, p *proc, q, what string, ready func(names []string) bool) (time.Time, bool) {
	t.Helper()
	return waitForNames(t, p, filepath.Join(q, errorStage), what, ready)
}

// waitForNames polls dir until ready holds of its entries' names, and
// returns when; false if p exits first.
func waitForNames(t *testing.T, p *proc, dir, what string, ready func(names []string) bool) (time.Time, bool) {
	t.Helper()
	var seen time.Time
	exited := false
	if !poll(cmdTimeout, 200*time.Microsecond, func() bool {
		select {
		case <-p.done:
			exited = true
			return true
		default:
		}
		f, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ready(names) {
			seen = time.Now()
			return true
		}
		return false
	}) {
		t.Fatalf("%s: not seen in %s within %v", what, dir, cmdTimeout)
	}
	return seen, !exited
}

// staging holds once one entry of error/ carries a replay's or a
// discard's staging prefix: the intent committed, the moves began.
func staging(prefix string) func([]string) bool {
	return func(names []string) bool {
		for _, n := range names {
			if strings.HasPrefix(n, prefix) {
				return true
			}
		}
		return false
	}
}

// releasing holds once all of letters dead letters are staged (no name
// of error/ is outside the staging prefix) and at least one has left
// error/ again: the intent is past staged, its files are being released
// (replayed to inbox/, or removed or moved by a discard).
func releasing(prefix string, letters int) func([]string) bool {
	return func(names []string) bool {
		staged := 0
		for _, n := range names {
			if !strings.HasPrefix(n, prefix) {
				return false
			}
			staged++
		}
		return staged > 0 && staged < letters
	}
}

// waitForStaging waits for a replay's first staging name in error/.
func waitForStaging(t *testing.T, p *proc, q string) (time.Time, bool) {
	t.Helper()
	return waitForErrorStage(t, p, q, "a replay's first move", staging(".spool-replay-"))
}
