//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/spoolq/spool/internal/testenv"
	"golang.org/x/sys/unix"
)

// keyServer is a downstream that counts, per Idempotency-Key, the requests
// in flight at once. A request whose client was killed runs on to its end,
// as it does at a real server: the server learns the client is gone only
// when it answers.
type keyServer struct {
	URL     string
	mu      sync.Mutex
	latency time.Duration  // of the requests that arrive from now on
	now     map[string]int // requests of a key in flight
	seen    map[string]int // requests of a key in all
	// overlaps are the keys that had two requests in flight at once.
	overlaps []string
}

func newKeyServer(t *testing.T, latency time.Duration) *keyServer {
	t.Helper()
	s := &keyServer{latency: latency, now: map[string]int{}, seen: map[string]int{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func (s *keyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	s.now[key]++
	s.seen[key]++
	if s.now[key] > 1 {
		s.overlaps = append(s.overlaps, key)
	}
	latency := s.latency
	s.mu.Unlock()
	time.Sleep(latency) // the downstream's latency, not a synchronisation
	s.mu.Lock()
	s.now[key]--
	s.mu.Unlock()
}

// setLatency makes the requests that arrive from now on take d; those
// in flight keep theirs.
func (s *keyServer) setLatency(d time.Duration) {
	s.mu.Lock()
	s.latency = d
	s.mu.Unlock()
}

// inFlight is the number of requests in flight, of every key.
func (s *keyServer) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range s.now {
		n += k
	}
	return n
}

// TestPostKilledInFlight: a consumer killed with calls in flight at a slow
// endpoint, restarted at once, does not send those keys again while the
// first requests still run at the server: the dead session's reservations
// are held until its calls can no longer run (--post-timeout since its
// death was found), and the restart goes on with other messages meanwhile.
// Every message is processed once.
func TestPostKilledInFlight(t *testing.T) {
	t.Parallel()
	testPostKilledInFlight(t, 0)
}

// TestPostKilledInFlightShorterTimeout: the same, with the consumer
// restarted with a --post-timeout far shorter than the killed one's (and
// a server now quick to answer): the dead session's msg_ids are held for
// its own timeout, which its reservations recorded, not the restart's.
// Held for the restart's, they would go out again while the first
// requests still ran.
func TestPostKilledInFlightShorterTimeout(t *testing.T) {
	t.Parallel()
	testPostKilledInFlight(t, 300*time.Millisecond)
}

// testPostKilledInFlight kills a consumer with calls in flight and
// restarts it at once, with its own --post-timeout, or with restart when
// not zero (the server then answering new requests in a tenth of it).
func testPostKilledInFlight(t *testing.T, restart time.Duration) {
	const conc, n = 4, 8
	// The first requests must still run at the server when the restart
	// could send them again, however slow a loaded machine is to restart.
	latency, timeout := 2*time.Second, 3*time.Second
	if testenv.IsLong() {
		latency, timeout = 5*time.Second, 6*time.Second
	}
	q, _ := workQueue(t)
	l := sqliteEngine.open(t, q)
	for i := range n {
		putMessage(t, q, fmt.Sprintf("m%02d.json", i), orderMessage(fmt.Sprintf("m%02d", i), "A", i+1, "1.00"))
	}
	srv := newKeyServer(t, latency)
	args := []string{"consume", q, "--post", srv.URL, "--concurrency", strconv.Itoa(conc),
		"--post-timeout", timeout.String(), "--batch", strconv.Itoa(conc)}
	p := start(t, args...)
	waitFor(t, cmdTimeout, "the first calls to be in flight", func() bool { return srv.inFlight() >= conc })
	if !p.killAfter(t, 0) {
		t.Fatalf("the consumer exited before the kill\n%s", p.result())
	}
	if restart > 0 {
		srv.setLatency(restart / 10)
		args[slices.Index(args, "--post-timeout")+1] = restart.String()
	}
	r := mustRun(t, 0, args...)
	if st := parseStats(t, r); st.Recovered == 0 {
		t.Errorf("the restart recovered nothing\n%s", r)
	}
	if !strings.Contains(r.stderr, "holding the msg_ids whose calls a dead consumer may still be running") {
		t.Errorf("the restart does not say it holds the dead consumer's msg_ids\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, `proof="call bound passed"`) {
		t.Errorf("the restart does not say it released the dead consumer's msg_ids at the call bound\n%s", r.stderr)
	}
	srv.mu.Lock()
	overlaps, seen := srv.overlaps, srv.seen
	srv.mu.Unlock()
	if len(overlaps) > 0 {
		t.Errorf("keys with two requests in flight at once: %v", overlaps)
	}
	again := 0
	for k, v := range seen {
		if v > 2 {
			t.Errorf("key %s reached the server %d times, want at most twice (once before the kill)", k, v)
		}
		again += v - 1
	}
	if again > conc {
		t.Errorf("%d keys sent again after one kill, want at most %d", again, conc)
	}
	checkCallsSettled(t, q, l, n, 0)
}

// TestExecKilledInFlight: a consumer killed while its --exec runs are in
// flight, restarted at once, never runs one msg_id twice at once. Each run
// holds a lock on a file of its msg_id for as long as any process of it
// lives (flock(1) and the sleep it starts, children of the run's shell),
// and records an overlap when the lock is taken. The first run of each
// msg_id outlives its --exec-timeout: only its consumer could kill it at
// the timeout, and it is dead. The restart must kill what the dead runs
// left before it runs those msg_ids again.
func TestExecKilledInFlight(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("flock"); err != nil {
		testenv.Missing(t, "flock(1) is not installed (util-linux): skipped")
	}
	const conc, n = 4, 8
	q, state := workQueue(t)
	l := sqliteEngine.open(t, q)
	for i := range n {
		putMessage(t, q, fmt.Sprintf("m%02d.json", i), orderMessage(fmt.Sprintf("m%02d", i), "A", i+1, "1.00"))
	}
	s := shellQuote(state)
	run := `lock=` + s + `/$SPOOL_MSG_ID.lock
if [ ! -e ` + s + `/$SPOOL_MSG_ID.ran ]; then
  touch ` + s + `/$SPOOL_MSG_ID.ran
  flock -n "$lock" sleep 5 || echo "$SPOOL_MSG_ID" >> ` + s + `/overlaps
else
  flock -n "$lock" true || echo "$SPOOL_MSG_ID" >> ` + s + `/overlaps
fi`
	args := []string{"consume", q, "--exec", run, "--exec-timeout", "1s", "--retry-wait", "1m",
		"--concurrency", strconv.Itoa(conc), "--batch", strconv.Itoa(conc)}
	p := start(t, args...)
	waitFor(t, cmdTimeout, "the first runs to hold their locks", func() bool {
		return len(lockHolders(t, state)) >= conc
	})
	if !p.killAfter(t, 0) {
		t.Fatalf("the consumer exited before the kill\n%s", p.result())
	}
	r := mustRun(t, 0, args...)
	if st := parseStats(t, r); st.Processed != n {
		t.Errorf("processed %d, want %d\n%s", st.Processed, n, r)
	}
	if b, err := os.ReadFile(filepath.Join(state, "overlaps")); err == nil {
		t.Errorf("msg_ids run twice at once:\n%s", b)
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if left := lockHolders(t, state); len(left) > 0 {
		t.Errorf("runs of the killed consumer still hold locks: %v", left)
	}
	checkCallsSettled(t, q, l, n, 0)
}

// lockHolders lists the lock files of state that a process holds now, as
// /proc/locks shows them: probing with flock(1) would take the lock for an
// instant, and a run trying it then would see an overlap.
func lockHolders(t *testing.T, state string) []string {
	t.Helper()
	locks, err := filepath.Glob(filepath.Join(state, "*.lock"))
	if err != nil {
		t.Fatal(err)
	}
	table, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{} // "MAJOR:MINOR:INODE" of the locks held
	for _, line := range strings.Split(string(table), "\n") {
		if f := strings.Fields(line); len(f) >= 6 && f[1] == "FLOCK" {
			held[f[5]] = true
		}
	}
	var out []string
	for _, f := range locks {
		var st syscall.Stat_t
		if err := syscall.Stat(f, &st); err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
		if held[id] {
			out = append(out, filepath.Base(f))
		}
	}
	return out
}

// resetServer answers every request after reading it whole, except that
// now and then, on a connection that served a request before (a kept-alive
// one, which is where net/http's transport would resend on its own), it
// resets the connection instead of answering. It counts every request it
// read.
type resetServer struct {
	URL      string
	requests atomic.Int64
	resets   atomic.Int64
}

type connKey struct{}

func newResetServer(t *testing.T, every int) *resetServer {
	t.Helper()
	s := &resetServer{}
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.requests.Add(1)
		served := r.Context().Value(connKey{}).(*atomic.Int64)
		if served.Add(1) > 1 && n.Add(1)%int64(every) == 0 {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // close with a reset
			}
			_ = conn.Close()
			s.resets.Add(1)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, new(atomic.Int64))
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// TestPostResetsCounted: with --rate and a server that resets a third of
// its kept-alive connections after reading the request, every request the
// server read is one of spool's counted attempts (a success, or a failure
// that scheduled a retry): the HTTP transport resends nothing by itself.
func TestPostResetsCounted(t *testing.T) {
	t.Parallel()
	n := 60
	if testenv.IsLong() {
		n = 200
	}
	q, _ := workQueue(t)
	for i := range n {
		putMessage(t, q, fmt.Sprintf("m%03d.json", i), orderMessage(fmt.Sprintf("m%03d", i), "A", i+1, "1.00"))
	}
	srv := newResetServer(t, 3)
	r := mustRun(t, 0, "consume", q, "--post", srv.URL, "--rate", "100/s", "--concurrency", "4",
		"--retry-base", "10ms", "--retry-cap", "50ms", "--retry-max", "100", "--retry-wait", "1m")
	st := parseStats(t, r)
	if st.Processed != n {
		t.Fatalf("processed %d, want %d\n%s", st.Processed, n, r)
	}
	retries := strings.Count(r.stderr, `msg="retry scheduled"`)
	got, resets := srv.requests.Load(), srv.resets.Load()
	t.Logf("%d messages: the server read %d requests and reset %d; spool counted %d successes and %d failed attempts",
		n, got, resets, st.Processed, retries)
	if resets == 0 {
		t.Fatal("the server reset no connection: the test tests nothing")
	}
	if want := int64(st.Processed + retries); got != want {
		t.Errorf("the server read %d requests, spool counted %d attempts (%d successes, %d retries)", got, want, st.Processed, retries)
	}
}

// TestExecDiesWithConsumer: a run's shell dies with its consumer, with no
// other consumer to recover it: killed with SIGKILL, the consumer takes
// its runs' shells with it (the runs exec into sleep, which keeps the
// shell's parent-death signal).
func TestExecDiesWithConsumer(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	for i := range 2 {
		putMessage(t, q, fmt.Sprintf("m%d.json", i), orderMessage(fmt.Sprintf("m%d", i), "A", i+1, "1.00"))
	}
	pids := filepath.Join(state, "pids")
	p := start(t, "consume", q, "--exec", "echo $$ >> "+shellQuote(pids)+"; exec sleep 60", "--concurrency", "2")
	waitFor(t, cmdTimeout, "both runs to start", func() bool { return len(readLines(t, pids)) >= 2 })
	if !p.killAfter(t, 0) {
		t.Fatalf("the consumer exited before the kill\n%s", p.result())
	}
	for _, s := range readLines(t, pids) {
		pid, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("pid %q: %v", s, err)
		}
		waitFor(t, 10*time.Second, fmt.Sprintf("run %d to die with its consumer", pid), func() bool {
			return !alive(pid)
		})
	}
}

// alive reports whether pid is a live process (a zombie is not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: comm may hold spaces, the state follows its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestPostKillStorm (long): two consumers post to a slow endpoint while
// one or the other is killed at a random instant and replaced at once,
// again and again; no key ever has two requests in flight at the server at
// once, and every message ends processed once.
func TestPostKillStorm(t *testing.T) {
	testenv.Long(t, "kill storm of --post consumers")
	t.Parallel()
	rng := newRand(t)
	const conc, n = 16, 600
	q, _ := workQueue(t)
	l := sqliteEngine.open(t, q)
	for i := range n {
		putMessage(t, q, fmt.Sprintf("m%03d.json", i), orderMessage(fmt.Sprintf("m%03d", i), "A", i+1, "1.00"))
	}
	// Requests outlive the time between kills: a restart that sent a
	// dead consumer's keys again at once would overlap them.
	srv := newKeyServer(t, time.Second)
	args := []string{"consume", q, "--post", srv.URL, "--concurrency", strconv.Itoa(conc), "--post-timeout", "3s"}
	ps := []*proc{start(t, args...), start(t, args...)}
	kills := 0
	for round := 0; kills < 30 && round < 300 && countNames(t, q, inbox)+countClaims(t, q) > 0; round++ {
		i := rng.IntN(len(ps))
		if ps[i].killAfter(t, logDelay(rng, 20*time.Millisecond, 500*time.Millisecond)) {
			kills++
		} else if r := ps[i].result(); r.code != 0 {
			t.Fatalf("a consumer failed by itself:\n%s", r)
		}
		ps[i] = start(t, args...)
	}
	for _, p := range ps {
		if r := p.wait(t); r.code != 0 {
			t.Fatalf("a consumer failed by itself:\n%s", r)
		}
	}
	t.Logf("%d kills", kills)
	mustRun(t, 0, args...)
	srv.mu.Lock()
	overlaps := srv.overlaps
	srv.mu.Unlock()
	if len(overlaps) > 0 {
		t.Errorf("%d times a key had two requests in flight at once: %v", len(overlaps), overlaps)
	}
	checkCallsSettled(t, q, l, n, 0)
}

// TestShowReservation: spool show tells of a msg_id reserved for a call:
// in flight while its session is in processing/, then, once the killed
// consumer's claims are recovered without its reservations (fsck
// --repair has no Caller to wait for), held for the session's call bound;
// fsck reports the session that holds it, and a stale calls lock.
func TestShowReservation(t *testing.T) {
	t.Parallel()
	q, _ := workQueue(t)
	putMessage(t, q, "m.json", orderMessage("m", "A", 1, "1.00"))
	srv := newKeyServer(t, 3*time.Second)
	p := start(t, "consume", q, "--post", srv.URL, "--post-timeout", "5s")
	waitFor(t, cmdTimeout, "the call to be in flight", func() bool { return srv.inFlight() == 1 })
	if !p.killAfter(t, 0) {
		t.Fatalf("the consumer exited before the kill\n%s", p.result())
	}
	if out := mustRun(t, 0, "show", q, "m").stdout; !strings.Contains(out, "reserved ") ||
		!strings.Contains(out, "its session is in processing/, so its call is in flight") ||
		!strings.Contains(out, "/m.json (claimed by a consumer)") {
		t.Errorf("show of a msg_id in flight (its claim found by the reservation's):\n%s", out)
	}
	mustRun(t, 0, "fsck", q, "--repair")
	out := mustRun(t, 0, "show", q, "m").stdout
	if !strings.Contains(out, "that consumer is gone; its call may still run, so the msg_id is held until its call bound (5s) has passed") ||
		!regexp.MustCompile(`(?m)^now +inbox/m\.json$`).MatchString(out) {
		t.Errorf("show of a msg_id a killed consumer's call holds, its file recovered to inbox/:\n%s", out)
	}
	var story struct {
		Reservation *struct {
			Session          string   `json:"session"`
			CallBoundSeconds *float64 `json:"call_bound_seconds"`
			InProcessing     bool     `json:"session_in_processing"`
		} `json:"reservation"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "show", q, "m", "--json").stdout), &story); err != nil {
		t.Fatal(err)
	}
	if r := story.Reservation; r == nil || r.Session == "" || r.CallBoundSeconds == nil || *r.CallBoundSeconds != 5 || r.InProcessing {
		t.Errorf("show --json reservation: %+v", r)
	}
	// fsck tells of the session that holds it, and of a calls lock no
	// session needs any more, which --repair removes.
	if err := os.MkdirAll(filepath.Join(q, ".calls"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(q, ".calls"), "abcd1234-99@gone", "")
	out = mustRun(t, 0, "fsck", q).stdout
	if !regexp.MustCompile(`(?m)^info held-reservations: 1 consumer sessions that are gone still hold msg_ids reserved for their calls.*e\.g\. session \S+ \(call bound 5s\)$`).MatchString(out) ||
		!strings.Contains(out, "info stale-calls-locks: 1 calls locks of consumers that are gone and hold no reservation (--repair removes them, as a consumer's start does); e.g. .calls/abcd1234-99@gone\n") {
		t.Errorf("fsck of a held reservation and a stale calls lock:\n%s", out)
	}
	r := mustRun(t, 0, "fsck", q, "--repair")
	if _, err := os.Stat(filepath.Join(q, ".calls", "abcd1234-99@gone")); !os.IsNotExist(err) {
		t.Errorf("the stale calls lock after fsck --repair: %v, want it removed", err)
	}
	if want := "repaired .calls/abcd1234-99@gone: removed the calls lock of a consumer that is gone and holds no reservation"; !strings.Contains(r.stdout+r.stderr, want) {
		t.Errorf("fsck --repair does not say %q:\n%s", want, r)
	}

	// And the console's page of the message, where a browser is at hand.
	if os.Getenv(chromiumEnv) == "" && !testenv.CI() {
		return
	}
	alloc := browser(t)
	tokens := tokenFile(t, t.TempDir(), "tokens", tokenLine("vic", "viewer", "vic-token"))
	_, base := startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--auth", tokens)
	vic := consoleSession(t, alloc, base, "vic-token")
	do(t, vic, "the message's page", chromedp.Navigate(base+"/#/message/m"), chromedp.WaitVisible("#reservation"))
	if got := text(t, vic, "#reservation"); !strings.Contains(got, "that consumer is gone; its call may still run, so the msg_id is held for its call bound (5 s)") {
		t.Errorf("the console's reservation line: %q", got)
	}
}
