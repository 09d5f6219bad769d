//go:build linux

package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPostKilledUncalledReleased: a consumer killed with conc calls in
// flight and more messages reserved whose calls never started (a batch
// larger than its concurrency, at a slow endpoint), restarted at once,
// sends the never-called messages without waiting for the call timeout:
// only the msg_ids whose call may still run at the server are held, and
// no key ever has two requests in flight there. Every message is
// processed once.
func TestPostKilledUncalledReleased(t *testing.T) {
	t.Parallel()
	const conc, n = 2, 10
	// The calls in flight at the kill still run at the server when the
	// restart starts; the timeout, which holds them, is long enough that
	// a restart waiting for it is told from one that does not.
	latency, timeout := 2*time.Second, 6*time.Second
	q, _ := workQueue(t)
	l := sqliteEngine.open(t, q)
	for i := range n {
		putMessage(t, q, fmt.Sprintf("m%02d.json", i), orderMessage(fmt.Sprintf("m%02d", i), fmt.Sprintf("o%02d", i), 1, "1.00"))
	}
	srv := newKeyServer(t, latency)
	args := func(c int) []string {
		return []string{"consume", q, "--post", srv.URL, "--concurrency", strconv.Itoa(c),
			"--post-timeout", timeout.String(), "--batch", strconv.Itoa(n)}
	}
	p := start(t, args(conc)...)
	waitFor(t, cmdTimeout, "the first calls to be in flight", func() bool { return srv.inFlight() >= conc })
	if !p.killAfter(t, 0) {
		t.Fatalf("the consumer exited before the kill\n%s", p.result())
	}
	srv.mu.Lock()
	calledBefore := map[string]bool{}
	for k := range srv.seen {
		calledBefore[k] = true
	}
	srv.mu.Unlock()
	if len(calledBefore) != conc {
		t.Fatalf("%d keys reached the server before the kill, want %d (the concurrency)", len(calledBefore), conc)
	}
	// The restart, with room for every message at once.
	restarted := time.Now()
	r := start(t, args(n)...)
	uncalled := func() (sent int) {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for k := range srv.seen {
			if !calledBefore[k] {
				sent++
			}
		}
		return sent
	}
	waitFor(t, cmdTimeout, "the never-called messages to be sent", func() bool { return uncalled() == n-conc })
	if waited := time.Since(restarted); waited >= timeout {
		t.Errorf("the %d messages never called before the kill reached the server %v after the restart, want before the call timeout (%v): they were held like the calls in flight", n-conc, waited.Round(time.Millisecond), timeout)
	}
	res := r.wait(t)
	if res.code != 0 {
		t.Fatalf("the restart failed\n%s", res)
	}
	if !strings.Contains(res.stderr, "whose call never started") || !strings.Contains(res.stderr, fmt.Sprintf("reservations=%d", n-conc)) {
		t.Errorf("the restart does not say it released the %d reservations of calls never started\n%s", n-conc, res.stderr)
	}
	srv.mu.Lock()
	overlaps, seen := srv.overlaps, srv.seen
	srv.mu.Unlock()
	if len(overlaps) > 0 {
		t.Errorf("keys with two requests in flight at once: %v", overlaps)
	}
	for k, v := range seen {
		if want := 1 + map[bool]int{true: 1}[calledBefore[k]]; v > want {
			t.Errorf("key %s reached the server %d times, want at most %d", k, v, want)
		}
	}
	checkCallsSettled(t, q, l, n, 0)
}
