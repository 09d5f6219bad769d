//go:build linux

package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// holdServer is the downstream of the tests of recovery beside a busy
// peer: a request to /hold is held until its client goes away (the
// consumer that made it was killed) or the test ends, a call in flight at
// its consumer's death or freeze; any other request is answered 200 at
// once. It listens on every address, for consumers in a network namespace
// of their own too.
type holdServer struct {
	port     int
	quit     chan struct{}
	held     atomic.Int64 // requests to /hold in flight
	answered atomic.Int64 // requests answered
}

func newHoldServer(t *testing.T) *holdServer {
	t.Helper()
	s := &holdServer{quit: make(chan struct{})}
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	t.Cleanup(func() { close(s.quit) }) // before Close, which waits for the held requests
	s.port = ln.Addr().(*net.TCPAddr).Port
	return s
}

func (s *holdServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.URL.Path == "/hold" {
		s.held.Add(1)
		defer s.held.Add(-1)
		select {
		case <-r.Context().Done():
		case <-s.quit:
		}
		return
	}
	s.answered.Add(1)
}

// url is the address of path as a consumer on host (its gateway; "" for
// this namespace) reaches it.
func (s *holdServer) url(gateway, path string) string {
	if gateway == "" {
		gateway = "127.0.0.1"
	}
	return fmt.Sprintf("http://%s:%d%s", gateway, s.port, path)
}

// sessionOf returns the name of the one session directory in processing/
// whose name matches re, failing the test unless there is exactly one.
func sessionOf(t *testing.T, q string, re *regexp.Regexp) string {
	t.Helper()
	var found []string
	for _, name := range dirNames(t, filepath.Join(q, processing)) {
		if re.MatchString(name) {
			found = append(found, name)
		}
	}
	if len(found) != 1 {
		t.Fatalf("sessions in processing/ matching %v: %v, want one", re, found)
	}
	return found[0]
}

// sessionClaims counts the claims in the session directory of processing/;
// -1 once the directory is gone.
func sessionClaims(q, session string) int {
	in, err := os.ReadDir(filepath.Join(q, processing, session))
	if err != nil {
		return -1
	}
	return countSessionClaims(in)
}

// reserved counts the reservations the ledger holds for session.
func reserved(t *testing.T, l callLedger, session string) int {
	t.Helper()
	if !regexp.MustCompile(`^[0-9a-f]+-[0-9]+@[A-Za-z0-9._-]+$`).MatchString(session) {
		t.Fatalf("%q is not a session name", session)
	}
	return count(t, l.db, fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE owner = '%s'", l.table("reservations"), session))
}

// besidePeer is the scenario of the tests below: a consumer (the victim)
// holding claims, and calls in flight that the downstream never answers,
// dies or freezes beside a peer that drains a long backlog, one process
// each on one queue. The peer, busy with one long pass, must recover the
// victim's claims within a bound and release the msg_ids of its calls
// within their bound: on its recovery clock, not once its pass is over.
type besidePeer struct {
	q       string
	l       callLedger
	srv     *holdServer
	db      []string      // consume's ledger arguments for this namespace
	n       int           // the backlog
	timeout time.Duration // --post-timeout: how long the victim's called msg_ids are held
}

// args are consume's arguments for a consumer posting to url.
func (b besidePeer) args(db []string, url string, extra ...string) []string {
	a := []string{"consume", b.q, "--post", url, "--post-timeout", b.timeout.String(),
		"--log-level", "info", "--progress=false"}
	return append(append(a, db...), extra...)
}

// peerArgs start the peer: a pass over the backlog that lasts 20 s at
// least (--rate), longer than every bound checked while it runs. The
// peer runs longSpool: the long backlog's 1 000 calls a second, under the
// race detector on a loaded machine, once outlasted the test's timeout. The
// bounds are seconds where the consumer takes one (its recovery clock
// ticks every second): a machine loaded by CI and -race once took 7 s, and
// a recovery that waited for the pass would take 20.
func (b besidePeer) peerArgs(db []string) []string {
	return b.args(db, b.srv.url("", "/"), "--concurrency", "16", "--rate", fmt.Sprintf("%d/s", b.n/20))
}

// check waits for the victim's session to leave processing/ within
// recovered of since (its death, or its freeze), and its reservations to
// be released within their bound: --post-timeout after the peer found the
// session dead, which it did within recovered, and a recovery (a second).
// Both while the peer's drain runs; then it stops the peer, drains the
// rest, and checks that every message was processed once.
func (b besidePeer) check(t *testing.T, peer *proc, session string, since time.Time, recovered time.Duration) {
	t.Helper()
	running := func(what string) {
		t.Helper()
		select {
		case <-peer.done:
			t.Fatalf("the peer's drain ended before %s (%v after the victim stopped): its pass must outlast the bounds checked\n%s",
				what, time.Since(since).Round(time.Millisecond), peer.result())
		default:
		}
	}
	waitFor(t, time.Until(since.Add(recovered)), "the victim's claims to be recovered by the busy peer",
		func() bool { return sessionClaims(b.q, session) < 0 })
	t.Logf("the victim's claims recovered %v after it stopped", time.Since(since).Round(time.Millisecond))
	running("the victim's claims were recovered")
	waitFor(t, time.Until(since.Add(recovered+b.timeout+time.Second)), "the victim's held msg_ids to be released by the busy peer",
		func() bool { return reserved(t, b.l, session) == 0 })
	t.Logf("its reservations released %v after it stopped", time.Since(since).Round(time.Millisecond))
	running("the victim's held msg_ids were released")
	// The bounds held while the pass ran; the rest of the backlog need not
	// wait out its rate. The peer stops gracefully (and says what it
	// recovered), and a consumer without --rate drains what is left.
	if err := peer.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := peer.wait(t)
	if r.code != 0 {
		t.Fatalf("the peer failed\n%s", r)
	}
	if st := parseStats(t, r); st.Recovered == 0 {
		t.Errorf("the peer says it recovered nothing\n%s", r.stdout)
	}
	longSpool(t).mustRun(t, 0, b.args(b.db, b.srv.url("", "/"), "--concurrency", "16")...)
	checkCallsSettled(t, b.q, b.l, b.n, 0)
}

// TestRecoverBesideBusyPeer: a consumer killed (SIGKILL) with claims in
// processing/ and calls in flight, beside a peer on the same host that is
// draining a long backlog (one pass of seconds, 20 000 messages in the long
// run): the peer recovers the dead consumer's claims within 8 s, while its
// pass runs, and releases the msg_ids of its calls within their bound
// (--post-timeout after it found them dead) and a recovery, not once the
// pass is over.
func TestRecoverBesideBusyPeer(t *testing.T) {
	t.Parallel()
	b := besidePeer{n: testenv.Pick(20000, 3000), timeout: 2 * time.Second, srv: newHoldServer(t)}
	b.q, _ = workQueue(t)
	b.l = sqliteEngine.open(t, b.q)
	putMessagesQuiet(b.q, 0, b.n)
	victim := start(t, b.args(nil, b.srv.url("", "/hold"), "--concurrency", "4", "--batch", "16")...)
	waitFor(t, cmdTimeout, "the victim's calls to be in flight", func() bool { return b.srv.held.Load() >= 4 })
	peer := longSpool(t).start(t, b.peerArgs(b.db)...)
	waitFor(t, cmdTimeout, "the peer to be draining", func() bool { return b.srv.answered.Load() >= 100 })
	session := sessionOf(t, b.q, regexp.MustCompile(fmt.Sprintf(`-%d@`, victim.cmd.Process.Pid)))
	claims, held := sessionClaims(b.q, session), reserved(t, b.l, session)
	if claims <= 0 || held <= 0 {
		t.Fatalf("the victim holds %d claims and %d reservations, want some of each", claims, held)
	}
	if !victim.killAfter(t, 0) {
		t.Fatalf("the victim exited before the kill\n%s", victim.result())
	}
	killed := time.Now()
	t.Logf("killed the victim with %d claims and %d reservations", claims, held)
	b.check(t, peer, session, killed, 8*time.Second)
}

// TestTakeOverFrozenBesideBusyPeer: a consumer of another host frozen
// (SIGSTOP) with claims and calls in flight, beside a peer that drains a
// long backlog, on a PostgreSQL ledger that keeps the sessions' leases:
// the peer takes the frozen session over within its lease and 8 s, while
// its pass runs, and releases the msg_ids of its calls within their bound
// after that. The other host is a network namespace with a hostname of its
// own (see multihost_helpers_test.go).
func TestTakeOverFrozenBesideBusyPeer(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "needs root: a network namespace and a hostname for the other host")
	}
	for _, tool := range []string{"ip", "unshare", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, fmt.Sprintf("needs %s: %v", tool, err))
		}
	}
	if err := exec.Command("ip", "netns", "list").Run(); err != nil {
		testenv.Missing(t, fmt.Sprintf("ip netns unavailable: %v", err))
	}
	const lease = 4 * time.Second
	b := besidePeer{n: testenv.Pick(20000, 4000), timeout: time.Second, srv: newHoldServer(t)}
	b.q, _ = workQueue(t)
	if err := os.Chmod(b.q, 0o755); err != nil {
		t.Fatal(err)
	}
	b.l = postgresEngine.open(t, b.q)
	b.db = b.l.args
	putMessagesQuiet(b.q, 0, b.n)
	// The frozen host reaches the server through a port of this namespace.
	u, err := url.Parse(b.l.args[1])
	if err != nil {
		t.Fatal(err)
	}
	port := pgProxy(t, u.Host)
	h := newNetHost(t, 7)
	u.Host = fmt.Sprintf("%s:%d", h.gateway, port)
	leaseArgs := []string{"--lease", lease.String()}
	victim := startOn(t, h, nil, b.args([]string{"--db", u.String()}, b.srv.url(h.gateway, "/hold"),
		append(leaseArgs, "--concurrency", "4", "--batch", "16")...)...)
	waitFor(t, cmdTimeout, "the victim's calls to be in flight", func() bool { return b.srv.held.Load() >= 4 })
	peer := longSpool(t).start(t, append(b.peerArgs(b.db), leaseArgs...)...)
	waitFor(t, cmdTimeout, "the peer to be draining", func() bool { return b.srv.answered.Load() >= 100 })
	session := sessionOf(t, b.q, regexp.MustCompile("@"+regexp.QuoteMeta(h.name)+"$"))
	claims, held := sessionClaims(b.q, session), reserved(t, b.l, session)
	if claims <= 0 || held <= 0 {
		t.Fatalf("the victim holds %d claims and %d reservations, want some of each", claims, held)
	}
	victim.signal(syscall.SIGSTOP)
	frozen := time.Now()
	t.Logf("froze the victim with %d claims and %d reservations", claims, held)
	defer func() {
		if t.Failed() {
			t.Logf("the victim's stderr:\n%s", tail(victim.stderr.String(), 20))
		}
	}()
	b.check(t, peer, session, frozen, lease+8*time.Second)
	if strings.Contains(peer.result().stderr, "took over the claims of a consumer whose lease expired") {
		return
	}
	t.Errorf("the peer does not say it took the frozen session over\n%s", tail(peer.result().stderr, 20))
}
