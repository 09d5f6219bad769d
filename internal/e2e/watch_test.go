//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// produce puts messages first..first+n-1 into inbox/ the way producers must
// (docs/DESIGN.md, "The queue directory"): written under a hidden name, then
// renamed in.
func produce(t *testing.T, q string, first, n int) {
	t.Helper()
	in := filepath.Join(q, inbox)
	for i := first; i < first+n; i++ {
		tmp := filepath.Join(in, fmt.Sprintf(".w%d.tmp", i))
		data := fmt.Sprintf(`{"msg_id":"w-%05d","order_no":"o-%05d","seq":1,"amount":"%d.00"}`, i, i, i)
		if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(in, fmt.Sprintf("w%05d.json", i))); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
}

// TestWatchShutdown runs consume --watch: it consumes arrivals as they come,
// and on SIGTERM finishes the work in flight and exits 0, leaving nothing
// in processing/; what it did not claim waits in inbox/ for the next run.
func TestWatchShutdown(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	n, m := scale(300, 100), scale(2000, 500)

	p := start(t, "consume", q, "--watch", "--batch", "16")
	produce(t, q, 0, n)
	waitFor(t, cmdTimeout, fmt.Sprintf("the watcher to consume %d arrivals", n), func() bool {
		return countNames(t, q, done) == n
	})
	// A second wave, and SIGTERM while the watcher works on it.
	produce(t, q, n, m)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 0 {
		t.Fatalf("watcher after SIGTERM: want exit 0, got\n%s", r)
	}
	st := parseStats(t, r)
	requireEmpty(t, q, processing)
	consumed, waiting := countNames(t, q, done), countNames(t, q, inbox)
	if st.Processed != consumed || consumed+waiting != n+m || countNames(t, q, errorStage) != 0 {
		t.Errorf("after SIGTERM: summary processed=%d, done/ %d, inbox/ %d, want done+inbox = %d",
			st.Processed, consumed, waiting, n+m)
	}
	db := openLedger(t, q)
	if rows := count(t, db, `SELECT COUNT(*) FROM processed`); rows != consumed {
		t.Errorf("processed holds %d rows for %d files in done/", rows, consumed)
	}
	t.Logf("SIGTERM left %d of the second wave's %d in inbox/", waiting, m)

	r = mustRun(t, 0, "consume", q)
	if got := parseStats(t, r); got.Processed != waiting || got.Duplicates != 0 || got.Recovered != 0 {
		t.Errorf("drain after the watcher: %+v, want processed=%d and nothing else", got, waiting)
	}
	if got := count(t, db, `SELECT COUNT(*) FROM processed`); got != n+m {
		t.Errorf("processed holds %d rows, want %d", got, n+m)
	}
	if got := count(t, db, `SELECT COUNT(*) FROM claims`); got != n+m {
		t.Errorf("the ledger records %d claims, want %d", got, n+m)
	}
	requireEmpty(t, q, processing)
}
