//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spoolq/spool/internal/testenv"
)

// TestKilledWhileJoining kills consumers at the moment their presence
// appears in the queue (a new entry in processing/, or a hidden one in the
// queue directory, where a consumer may prepare its claim directory before
// publishing it): the moment a consumer is most likely between creating its
// session directory and locking or publishing it. Whatever state that
// leaves, the next clean drain run must leave processing/ empty (I5): a dead
// consumer's leftovers are recovered at once, not after a timeout; and
// nothing may have been claimed into a directory that recovery ignores.
func TestKilledWhileJoining(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	produce(t, q, 0, 5)
	proc := filepath.Join(q, processing)
	// presence lists the entries a consumer's start-up may create.
	presence := func() map[string]bool {
		m := map[string]bool{}
		des, _ := os.ReadDir(proc)
		for _, de := range des {
			m["processing/"+de.Name()] = true
		}
		des, _ = os.ReadDir(q)
		for _, de := range des {
			if strings.HasPrefix(de.Name(), ".") {
				m[de.Name()] = true
			}
		}
		return m
	}
	attempts, kills, unpublished := testenv.Pick(100, 20), 0, 0
	for i := 0; i < attempts && unpublished < 3; i++ {
		// A dead consumer's leftovers stay until the next run recovers
		// them: wait for a new entry, this consumer's.
		old := presence()
		p := start(t, "consume", q)
		// Busy-poll: the window is microseconds wide.
		poll(cmdTimeout, 0, func() bool {
			select {
			case <-p.done:
				return true
			default:
			}
			for name := range presence() {
				if !old[name] {
					_ = p.cmd.Process.Signal(syscall.SIGKILL)
					return true
				}
			}
			return false
		})
		<-p.done
		if p.killed {
			kills++
		} else if r := p.result(); r.code != 0 {
			t.Fatalf("consumer exited by itself with a failure:\n%s", r)
		}
		for name := range presence() {
			if !old[name] && strings.HasPrefix(filepath.Base(name), ".") {
				unpublished++
				t.Logf("attempt %d: a consumer killed while joining left %s", i+1, name)
			}
		}
	}
	t.Logf("%d kills as a consumer appeared; %d left an unpublished session directory", kills, unpublished)
	mustRun(t, 0, "consume", q)
	requireEmpty(t, q, processing)
	if n := countNames(t, q, done); n != 5 {
		t.Errorf("done/ holds %d messages, want all 5", n)
	}
	// What stays outside processing/ must hold nothing: a claim there would
	// be a message recovery never sees.
	for name := range presence() {
		if !strings.HasPrefix(name, "processing/") {
			if des, err := os.ReadDir(filepath.Join(q, name)); err == nil && len(des) > 0 {
				t.Errorf("%s/%s is left with %d entries", q, name, len(des))
			}
		}
	}
}
