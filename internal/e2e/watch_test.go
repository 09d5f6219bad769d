//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
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

// waitProgress polls count until it reaches want, failing the test when it
// has not grown for stall: a loaded machine (a race build, other suites
// beside) may take long over a large queue, but a lost file stops it.
func waitProgress(t *testing.T, stall time.Duration, what string, want int, count func() int) {
	t.Helper()
	last, since := -1, time.Now()
	for {
		n := count()
		if n == want {
			return
		}
		if n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > stall {
			t.Fatalf("waiting for %s: stuck at %d of %d for %v", what, n, want, stall)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// TestWatchShutdown runs consume --watch: it consumes arrivals as they come,
// and on SIGTERM finishes the work in flight and exits 0, leaving nothing
// in processing/; what it did not claim waits in inbox/ for the next run.
func TestWatchShutdown(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	n, m := testenv.Pick(300, 100), testenv.Pick(2000, 500)

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

// watchSummary is the second line consume --watch prints at exit.
var watchSummary = regexp.MustCompile(`(?m)^rescans=(\d+) overflows=(\d+)$`)

// parseWatch returns the rescans and overflows a watcher's summary reports.
func parseWatch(t *testing.T, r result) (rescans, overflows int) {
	t.Helper()
	m := watchSummary.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("want a line rescans=N overflows=N on stdout, got\n%s", r)
	}
	rescans, _ = strconv.Atoi(m[1])
	overflows, _ = strconv.Atoi(m[2])
	return rescans, overflows
}

// stopWatcher sends SIGTERM to a watcher and returns its result, which
// must be exit 0.
func stopWatcher(t *testing.T, p *proc) result {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 0 {
		t.Fatalf("watcher after SIGTERM: want exit 0, got\n%s", r)
	}
	return r
}

// TestWatchPickup: a message renamed into inbox/ while consume --watch
// waits is consumed (notifications, the default), and so it is with --poll.
// The bound is generous: it says the arrival was seen at all, not how soon
// (that is spool bench --watch's measurement).
func TestWatchPickup(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		args []string
	}{{"notify", nil}, {"poll", []string{"--poll", "50ms"}}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			q := filepath.Join(t.TempDir(), "q")
			mustRun(t, 0, "init", q)
			p := start(t, append([]string{"consume", q, "--watch"}, mode.args...)...)
			for i := range 3 {
				produce(t, q, i, 1)
				waitFor(t, 30*time.Second, fmt.Sprintf("arrival %d to reach done/", i+1), func() bool {
					return countNames(t, q, done) == i+1
				})
				time.Sleep(100 * time.Millisecond) // let the watcher go idle again
			}
			r := stopWatcher(t, p)
			if st := parseStats(t, r); st.Processed != 3 {
				t.Errorf("summary %+v, want processed=3", st)
			}
			rescans, overflows := parseWatch(t, r)
			polled := strings.Contains(r.stderr, "polling inbox/")
			if polled != (mode.name == "poll") || overflows != 0 {
				t.Errorf("mode %s: polling logged %v, rescans=%d overflows=%d\n%s", mode.name, polled, rescans, overflows, r)
			}
			requireEmpty(t, q, processing)
		})
	}
}

// TestWatchOverflow: a burst of arrivals larger than the kernel's queue of
// notifications loses nothing. The watcher is stopped (SIGSTOP) while the
// burst is written, so that its notifications certainly overflow
// fs.inotify.max_queued_events; when it continues, the overflow makes it
// rescan, it says so, and every message is consumed once. In the quick run
// the queue is filled before the burst by changes to two files that are
// not messages (a chmod is one event, and costs no consume), so that a
// burst of 1000 messages comes after the overflow and is known to the
// watcher only by its rescan; SPOOL_TEST_LONG=1 sends 50 000 messages,
// which overflow it by themselves (6000 did in the quick run before).
func TestWatchOverflow(t *testing.T) {
	t.Parallel()
	n := testenv.Pick(50000, 1000)
	limit := 16384 // the kernel's default
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		limit, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	// Each produced file makes 4 events: its temp file's create, write
	// and rename away, and the rename in. Fewer than the queue holds are
	// preceded by as many other events as it holds.
	noise := 0
	if 4*n <= limit {
		noise = limit + 1000
	}
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	p, base := startListening(t, "consume", q, "--watch", "--listen", "127.0.0.1:0")
	produce(t, q, 0, 1)
	waitFor(t, 30*time.Second, "the first arrival to reach done/", func() bool { return countNames(t, q, done) == 1 })

	p.freeze(t)
	if noise > 0 {
		// Dot files, which the consumer leaves alone, changed in turn
		// (the kernel merges an event with the one before only when they
		// are alike), and removed before the watcher continues.
		others := []string{filepath.Join(q, inbox, ".noise-a"), filepath.Join(q, inbox, ".noise-b")}
		for _, f := range others {
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for i := range noise {
			if err := os.Chmod(others[i%2], os.FileMode(0o600+i/2%2*0o44)); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range others {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(t, q, 1, n)
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitProgress(t, cmdTimeout, fmt.Sprintf("the burst of %d to reach done/", n), n+1, func() int { return countNames(t, q, done) })
	// The metrics count what the summary will: an overflow, and its rescan.
	// A rescan may have found the burst before the watcher read its way
	// through the other events to the overflow: it is counted soon after.
	var mOverflows, mRescans float64
	poll(30*time.Second, 10*time.Millisecond, func() bool {
		fams := scrapeMetrics(t, base)
		mOverflows, _ = fams.value("spool_watch_overflows_total")
		mRescans, _ = fams.value("spool_watch_rescans_total")
		return mOverflows >= 1 && mRescans >= mOverflows
	})
	if mOverflows < 1 || mRescans < mOverflows {
		t.Errorf("metrics: spool_watch_overflows_total %v, spool_watch_rescans_total %v: want an overflow, answered by a rescan", mOverflows, mRescans)
	}
	r := stopWatcher(t, p)
	if st := parseStats(t, r); st.Processed != n+1 || st.Duplicates != 0 || st.DeadLetters != 0 {
		t.Errorf("summary %+v, want processed=%d and nothing else", st, n+1)
	}
	rescans, overflows := parseWatch(t, r)
	if overflows < 1 || rescans < overflows {
		t.Errorf("rescans=%d overflows=%d: want an overflow, answered by a rescan", rescans, overflows)
	}
	if float64(overflows) < mOverflows {
		t.Errorf("summary overflows=%d, fewer than the metric's %v", overflows, mOverflows)
	}
	if !strings.Contains(r.stderr, "notifications overflowed; rescanning") {
		t.Errorf("no overflow logged:\n%s", r.stderr)
	}
	requireEmpty(t, q, processing)
	if left := countNames(t, q, inbox); left != 0 {
		t.Errorf("%d messages left in inbox/", left)
	}
	db := openLedger(t, q)
	if rows := count(t, db, `SELECT COUNT(*) FROM processed`); rows != n+1 {
		t.Errorf("processed holds %d rows, want %d", rows, n+1)
	}
}

// TestWatchRecoversDeadConsumer: a consumer killed with SIGKILL while it
// holds claims does not wait for the watcher's restart: the running
// watcher recovers its claims (on its recovery clock, every second) and
// consumes them.
func TestWatchRecoversDeadConsumer(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	const n = 6
	produce(t, q, 0, n)
	// The victim claims every message and sits in its handler.
	victim := start(t, "consume", q, "--exec", "sleep 600", "--concurrency", "2")
	waitFor(t, 30*time.Second, "the victim to claim inbox/", func() bool {
		return countNames(t, q, inbox) == 0 && countNames(t, q, done) == 0
	})
	// The watcher starts while the victim lives, so its start-up recovery
	// leaves the victim's claims alone; one message of its own proves it
	// has started and is idle.
	watcher := start(t, "consume", q, "--watch", "--exec", "cat >/dev/null")
	produce(t, q, n, 1)
	waitFor(t, 30*time.Second, "the watcher's own message to reach done/", func() bool { return countNames(t, q, done) == 1 })
	if got := countNames(t, q, done); got != 1 {
		t.Fatalf("done/ holds %d, want only the watcher's own message", got)
	}
	if victim.killAfter(t, 0) != true {
		t.Fatal("the victim was not running when killed")
	}
	waitFor(t, 60*time.Second, "the watcher to recover and consume the victim's claims", func() bool {
		return countNames(t, q, done) == n+1
	})
	select {
	case <-watcher.done:
		t.Fatalf("the watcher exited:\n%s", watcher.result())
	default:
	}
	r := stopWatcher(t, watcher)
	if st := parseStats(t, r); st.Processed != n+1 || st.Recovered != n {
		t.Errorf("watcher's summary %+v, want processed=%d recovered=%d", st, n+1, n)
	}
	if !strings.Contains(r.stderr, "recovered claims of dead consumers") {
		t.Errorf("no recovery logged:\n%s", r.stderr)
	}
	requireEmpty(t, q, processing)
}

// TestWatchMinAge: with --min-age a file that a producer writes in place,
// under its final name, is left alone while it is being written, even
// though each write is followed by setting its mtime an hour back (as
// cp -p or rsync -t leave it); once it has not changed for the minimum
// age it is consumed, whole.
func TestWatchMinAge(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	p := start(t, "consume", q, "--watch", "--min-age", "1s")
	body := `{"msg_id":"in-place-1","order_no":"o-1","seq":1,"amount":"12.50","note":"` + strings.Repeat("x", 40) + `"}`
	path := filepath.Join(q, inbox, "in-place.json")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	const pieces = 25 // one every 100 ms: 2.5 s, well past the minimum age
	step := (len(body) + pieces - 1) / pieces
	for i := 0; i < len(body); i += step {
		if _, err := f.WriteString(body[i:min(i+step, len(body))]); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatalf("the file left inbox/ while being written: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
		if claims, out := countClaims(t, q), countNames(t, q, done)+countNames(t, q, errorStage); claims+out != 0 {
			t.Fatalf("after %d of %d bytes: %d claims, %d in done/ or error/: taken while being written", i+step, len(body), claims, out)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the settled file to reach done/", func() bool { return countNames(t, q, done) == 1 })
	r := stopWatcher(t, p)
	if st := parseStats(t, r); st.Processed != 1 || st.DeadLetters != 0 {
		t.Errorf("summary %+v, want processed=1", st)
	}
	des, err := os.ReadDir(filepath.Join(q, done))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(q, done, des[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != body {
		t.Errorf("done/ holds %q, want the whole message %q", got, body)
	}
}

// TestWatchStageReplaced: inbox/ moved aside and made anew while a watch
// runs. The watcher works through the directory it opened, so it would go
// on watching the old one, with the new one's files waiting unseen and
// the metrics saying the inbox is empty; it fails instead (exit 3, for
// its supervisor to restart it on the new directory), and spool serve's
// /readyz says so.
func TestWatchStageReplaced(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	p := start(t, "consume", q, "--watch")
	s, url := startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--metrics-refresh", "200ms")
	produce(t, q, 0, 1)
	waitFor(t, 30*time.Second, "the first arrival to reach done/", func() bool { return countNames(t, q, done) == 1 })
	in := filepath.Join(q, inbox)
	if err := os.Rename(in, in+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	produce(t, q, 1, 2)
	r := p.wait(t)
	if r.code != 3 || !strings.Contains(r.stderr, "stage inbox was replaced while the queue was open") {
		t.Fatalf("watcher after inbox/ was replaced: want exit 3 saying so\n%s", r)
	}
	// serve holds no claim: it follows the new inbox/ (its backlog is
	// what the path names now) and stays ready.
	waitMetrics(t, url, []want{{"spool_queue_messages", []string{"stage", "inbox"}, float64(countNames(t, q, inbox))}})
	if code, body := get(t, url, "/readyz"); code != 200 {
		t.Errorf("serve's /readyz after inbox/ was replaced: %d %q, want 200 (it follows the new one)", code, body)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	s.wait(t)
	// Restarted, a consumer takes what waited in the new inbox/.
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st.Processed != 2 {
		t.Errorf("the next run processed %d, want the 2 that arrived in the new inbox/", st.Processed)
	}
}
