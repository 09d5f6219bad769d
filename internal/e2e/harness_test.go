//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// The harness every test of this package shares: waiting on a condition
// (never a fixed sleep where a condition can be named), and the queue
// builders. The running of the binary is in main_test.go (run, mustRun,
// start), the crash loops in crash_test.go.

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(timeout, 5*time.Millisecond, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// poll calls cond every interval (0: as often as it can) until it holds,
// and reports whether it did within timeout: the one deadline loop of the
// package, for a wait whose timeout is not a failure of its own, or whose
// failure needs to say more than waitFor does.
func poll(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval) // poll interval, not a wait for a result
	}
	return true
}

// workQueue initialises an empty queue for a handler test and returns it
// with a scratch directory beside it, where the test's scripts keep state.
func workQueue(t *testing.T) (q, state string) {
	t.Helper()
	base := t.TempDir()
	q, state = filepath.Join(base, "q"), filepath.Join(base, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, "init", q)
	return q, state
}

// putMessage puts one message into inbox/ as a producer must: written
// under a hidden name, then renamed in.
func putMessage(t *testing.T, q, name, body string) {
	t.Helper()
	tmp := filepath.Join(q, inbox, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(q, inbox, name)); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes a file the test reads or gives to spool (a script, a
// SQL file) and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// putMessages puts messages first..first+n-1 into inbox/ as m%05d.json;
// every poisonEvery-th one (when > 0) is not JSON.
func putMessages(t *testing.T, q string, first, n, poisonEvery int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		body := orderMessage(fmt.Sprintf("m-%05d", i), fmt.Sprintf("o-%05d", i), 1, "1.00")
		if poisonEvery > 0 && i%poisonEvery == 0 {
			body = "not json"
		}
		putMessage(t, q, fmt.Sprintf("m%05d.json", i), body)
	}
}

// longSpool is the binary of a process whose work at the long size is too
// slow under the race detector: the plain build in the long run, the
// tests' own build in the quick run, which has the race detector whenever
// the tests do and covers the same code.
func longSpool(t *testing.T) spoolAt {
	t.Helper()
	if testenv.IsLong() {
		return spoolAt{bin: plainSpool(t)}
	}
	return spoolAt{bin: spoolBin}
}
