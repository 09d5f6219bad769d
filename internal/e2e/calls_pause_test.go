//go:build linux

package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPostPauseAfterFailures: --pause-after N transient failures in a row
// pause every new call, not only the retries of the failed messages.
//
// The server answers its first N requests with a 500 at once, the others
// with a 200 after 300 ms (so the consumer sees the N failures before any
// success). The consumer pauses when it sees its Nth failure, for
// --retry-base (3 s). Only calls that had passed the pause's gate before
// that can reach the server meanwhile: at most the N-1 failures it saw
// before, and C calls in flight with the Nth. So, from the server's Nth
// refused answer (the pause cannot begin earlier), a window shorter than
// the pause sees fewer than N+C requests, where without a pause C
// requests every 300 ms would arrive (about 50 in the window). No
// duration is asserted: the pause begins after the Nth answer and lasts
// 3 s, however slow the machine.
func TestPostPauseAfterFailures(t *testing.T) {
	t.Parallel()
	const (
		conc   = 8
		after  = 3
		pause  = 3 * time.Second
		window = 2 * time.Second
	)
	q, _ := workQueue(t)
	const n = 60
	for i := range n {
		putMessage(t, q, fmt.Sprintf("m%03d.json", i), orderMessage(fmt.Sprintf("m%03d", i), "A", i+1, "1.00"))
	}
	srv := newCallServer(t, 300*time.Millisecond)
	requests := 0 // under srv.mu
	srv.mu.Lock()
	srv.answer = func(string, int) (int, string) {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		requests++
		if requests <= after {
			return http.StatusInternalServerError, "" // transient, no Retry-After
		}
		return 0, ""
	}
	srv.mu.Unlock()
	r := mustRun(t, 0, "consume", q, "--post", srv.URL, "--concurrency", strconv.Itoa(conc),
		"--pause-after", strconv.Itoa(after), "--retry-base", pause.String(), "--retry-cap", pause.String(), "--retry-wait", "1m", "-v")
	if st := parseStats(t, r); st.Processed != n {
		t.Fatalf("processed %d, want %d\n%s", st.Processed, n, r)
	}
	if c := strings.Count(r.stderr, "calls paused"); c != 1 {
		t.Errorf("the pause was logged %d times, want once:\n%s", c, r.stderr)
	}
	if !strings.Contains(r.stderr, "transient failures in a row") {
		t.Errorf("the pause's log does not say why:\n%s", r.stderr)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.refused) != after {
		t.Fatalf("%d refused answers, want %d", len(srv.refused), after)
	}
	from := srv.refused[after-1]
	during, total := 0, 0
	for _, v := range srv.starts {
		for _, s := range v {
			total++
			if s.After(from) && s.Before(from.Add(window)) {
				during++
			}
		}
	}
	t.Logf("%d requests in all, %d in the %v after refused answer %d", total, during, window, after)
	if during >= after+conc {
		t.Errorf("%d requests within %v of failure %d, want fewer than %d: the calls did not pause",
			during, window, after, after+conc)
	}
}

// TestPostCallsOutsideTransactions: two consumer processes on one SQLite
// ledger, --concurrency 4 each, against a server that holds every request
// until 8 are in flight at once (or a minute has passed since the first),
// then answers them all, and every later one at once. The 8 can only be reached if
// each process makes its calls concurrently, and makes them while the
// other can still reserve and settle: a call made inside a ledger
// transaction, or while holding SQLite's write lock, would keep the other
// process from ever reserving its msg_ids (the held requests would wait
// for the minute, and no more than one process's calls would ever be in
// flight); calls made one at a time in a process would reach 2.
func TestPostCallsOutsideTransactions(t *testing.T) {
	t.Parallel()
	const (
		procs = 2
		conc  = 4
		want  = procs * conc
	)
	q, _ := workQueue(t)
	l := sqliteEngine.open(t, q)
	const n = 200
	for i := range n {
		putMessage(t, q, fmt.Sprintf("m%03d.json", i), orderMessage(fmt.Sprintf("m%03d", i), "A", i+1, "1.00"))
	}
	srv := newCallServer(t, time.Millisecond)
	// Under srv.mu: whether the barrier was reached, and until when the
	// requests wait for it (a minute from the first).
	reached := false
	var deadline time.Time
	srv.mu.Lock()
	srv.answer = func(string, int) (int, string) {
		for {
			srv.mu.Lock()
			if deadline.IsZero() {
				deadline = time.Now().Add(time.Minute)
			}
			if srv.inFlight >= want {
				reached = true
			}
			if reached || time.Now().After(deadline) {
				srv.mu.Unlock()
				return 0, ""
			}
			srv.mu.Unlock()
			time.Sleep(time.Millisecond) // polling, with a deadline
		}
	}
	srv.mu.Unlock()
	// Small batches, so that one process does not claim every message
	// before the other starts.
	args := []string{"consume", q, "--post", srv.URL, "--concurrency", strconv.Itoa(conc), "--batch", "4"}
	var ps []*proc
	for range procs {
		ps = append(ps, start(t, args...))
	}
	var failed []result
	processed := 0
	for _, p := range ps {
		r := p.wait(t)
		if r.code != 0 {
			failed = append(failed, r)
			continue
		}
		processed += parseStats(t, r).Processed
	}
	seen, maxInFlight := srv.seen(t)
	srv.mu.Lock()
	ok := reached
	srv.mu.Unlock()
	t.Logf("at most %d requests in flight at once", maxInFlight)
	if !ok {
		t.Errorf("never %d requests in flight at once (at most %d in a minute): calls of %d processes with --concurrency %d were serialized",
			want, maxInFlight, procs, conc)
	}
	for _, r := range failed {
		t.Errorf("a consumer failed:\n%s", r)
	}
	if len(failed) > 0 {
		t.FailNow()
	}
	if processed != n {
		t.Errorf("the consumers processed %d, want %d", processed, n)
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("the server saw key %s %d times, want once", k, c)
		}
	}
	checkCallsSettled(t, q, l, n, 0)
}
