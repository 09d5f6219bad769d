//go:build linux

package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// TestMultiHostFencing: three consumers as three hosts (own hostnames,
// own network namespaces) share one queue directory and one PostgreSQL
// ledger, calling one HTTP downstream, while messages keep arriving:
//
//   - a host is frozen (SIGSTOP) with calls in flight for longer than its
//     lease, so that the others take its claims over, and then woken: its
//     calls return, and it must commit nothing of them (its writes are
//     fenced by its lease), log once that it lost its lease, and go on as
//     a new session;
//   - a host is cut off from the database and the downstream (its link
//     down) for longer than its lease, then restored, with the same
//     outcome;
//   - SIGKILL storms across the hosts, each host restarted at once.
//
// Then every message must be processed exactly once in the ledger (one
// processed row each, no duplicate and no dead letter recorded: each was
// delivered once), no file lost (done/ holds each message once, the other
// stages nothing), nothing reserved, and the downstream must never have
// had two requests for one key in flight at once, but for a request on
// the wire when its host froze or was cut off.
//
// With SPOOL_TEST_UNFENCED=1 in the environment the hosts' ledgers skip
// the lease check of their writes, and the test fails: the woken host
// commits the calls whose claims were taken over, after the others
// processed those messages: a call that returned success as a duplicate
// row, one whose deadline passed while it was frozen as an attempt left
// behind.
func TestMultiHostFencing(t *testing.T) {
	testenv.Long(t, "three hosts in network namespaces, a freeze, a partition and kill storms")
	// Skipped without them, but CI (root, iproute2, util-linux) has them.
	if os.Geteuid() != 0 {
		testenv.Missing(t, "needs root: network namespaces and hostnames")
	}
	for _, tool := range []string{"ip", "unshare", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, fmt.Sprintf("needs %s: %v", tool, err))
		}
	}
	if err := exec.Command("ip", "netns", "list").Run(); err != nil {
		testenv.Missing(t, fmt.Sprintf("ip netns unavailable: %v", err))
	}
	// Not parallel: a 4s lease renewed every 1.3s must not lapse because
	// the machine is busy with the package's other tests (it runs before
	// them, alone).
	const (
		hosts    = 3
		lease    = 4 * time.Second
		timeout  = time.Second // --post-timeout, the bound of a call
		latency  = 40 * time.Millisecond
		conc     = 4
		arriving = 60 // messages per second while the scenario runs
	)
	dsn, admin := postgresServer(t)
	schema := postgresSchema(t, admin)
	u, err := url.Parse(withSearchPath(t, dsn, schema))
	if err != nil {
		t.Fatal(err)
	}
	port := pgProxy(t, u.Host)
	srv, httpPort := newHostCallServer(t, latency)

	q := t.TempDir()
	mustRun(t, 0, "init", q)
	if err := os.Chmod(q, 0o755); err != nil {
		t.Fatal(err)
	}
	var env []string
	if v := os.Getenv("SPOOL_TEST_UNFENCED"); v != "" {
		env = append(env, "SPOOL_TEST_UNFENCED="+v)
		t.Logf("SPOOL_TEST_UNFENCED=%s: the hosts' writes are not fenced", v)
	}
	nets := make([]*netHost, hosts)
	for i := range nets {
		nets[i] = newNetHost(t, i)
	}
	args := func(h *netHost) []string {
		hu := *u
		hu.Host = fmt.Sprintf("%s:%d", h.gateway, port)
		return []string{"consume", q, "--watch", "--db", hu.String(),
			"--post", fmt.Sprintf("http://%s:%d/%s", h.gateway, httpPort, h.name),
			"--post-timeout", timeout.String(), "--lease", lease.String(),
			"--concurrency", fmt.Sprint(conc), "--retry-base", "100ms", "--retry-cap", "500ms",
			"--retry-max", "1000", "--log-level", "info", "--progress=false"}
	}
	var mu sync.Mutex
	procs := make([]*hostProc, hosts)
	var logs []*hostProc // every process ever started, for its stderr
	startHost := func(i int) {
		p := startOn(t, nets[i], env, args(nets[i])...)
		mu.Lock()
		procs[i] = p
		logs = append(logs, p)
		mu.Unlock()
	}
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			for i, p := range logs {
				t.Logf("stderr of process %d (%s):\n%s", i, p.h.name, tail(p.stderr.String(), 40))
			}
		}
	})
	for i := range hosts {
		startHost(i)
	}

	// The producer: messages keep arriving while the scenario runs.
	var sent atomic.Int64
	stopProducing := make(chan struct{})
	var producing sync.WaitGroup
	producing.Go(func() {
		tick := time.NewTicker(time.Second / arriving)
		defer tick.Stop()
		for {
			select {
			case <-stopProducing:
				return
			case <-tick.C:
			}
			n := sent.Add(1)
			name := fmt.Sprintf("m%05d.json", n)
			if err := deliver(q, name, fmt.Sprintf(`{"msg_id":"k%05d","order_no":"o%d","seq":%d,"amount":"1.00"}`, n, n%7, n)); err != nil {
				t.Errorf("deliver %s: %v", name, err)
				return
			}
		}
	})

	// Windows in which a host could not be reached or did not run: a
	// request in flight at a window's start may overlap a takeover's.
	type window struct {
		host       string
		start, end time.Time
	}
	var windows []window
	time.Sleep(2 * time.Second) // all three consuming

	// A freeze past the lease, with calls in flight.
	frozen := nets[0]
	if !srv.waitInFlight(frozen.name, 10*time.Second) {
		t.Fatalf("%s never had a call in flight", frozen.name)
	}
	procs[0].signal(syscall.SIGSTOP)
	w := window{host: frozen.name, start: time.Now()}
	t.Logf("%s frozen with %d calls in flight", frozen.name, srv.inFlight(frozen.name))
	time.Sleep(lease + 2*timeout + 3*time.Second)
	procs[0].signal(syscall.SIGCONT)
	w.end = time.Now()
	windows = append(windows, w)
	// It finds its lease taken over (its first renewal, or the ledger's
	// refusal of its writes) and goes on as a new session.
	waitLogged(t, procs[0], 20*time.Second, "lost the lease")

	// A partition from the database and the downstream past the lease.
	cut := nets[1]
	if !srv.waitInFlight(cut.name, 10*time.Second) {
		t.Fatalf("%s never had a call in flight", cut.name)
	}
	cut.partition(t, true)
	w = window{host: cut.name, start: time.Now()}
	t.Logf("%s cut off with %d calls in flight", cut.name, srv.inFlight(cut.name))
	time.Sleep(lease + 2*timeout + 3*time.Second)
	cut.partition(t, false)
	w.end = time.Now()
	windows = append(windows, w)
	// Before the kill storms, which may start a consumer there.
	cut.waitReach(t, fmt.Sprintf("%s:%d", cut.gateway, port), 30*time.Second)
	// Its connections come back as TCP retransmits, after up to seconds.
	// It finds its lease taken over when they do, or, if a write of its
	// failed first while it could not reach the ledger, it gave its
	// session up itself and joins a new one.
	waitLogged(t, procs[1], 30*time.Second, "lost the lease", "cut off from the ledger")

	// Kill storms: a random host SIGKILLed and restarted, over and over,
	// and once all of them at once.
	kills := 0
	for round := range 8 {
		victims := []int{rand.IntN(hosts)}
		if round == 5 {
			victims = []int{0, 1, 2}
		}
		for _, i := range victims {
			procs[i].signal(syscall.SIGKILL)
			<-procs[i].done
			kills++
			startHost(i)
		}
		time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
	}
	close(stopProducing)
	producing.Wait()
	total := int(sent.Load())
	t.Logf("%d messages sent, %d kills", total, kills)

	// Everything processed: the ledger holds every key, the stages are
	// settled. Killed consumers' calls are held for --post-timeout after
	// their death is found, and taken-over claims wait for their lease.
	var processed, left int
	if !poll(90*time.Second, 200*time.Millisecond, func() bool {
		processed = count(t, admin, "SELECT COUNT(*) FROM "+schema+".processed")
		left = len(dirNames(t, filepath.Join(q, inbox))) + len(claimsIn(t, q))
		return processed >= total && left == 0
	}) {
		t.Errorf("after 90s: %d of %d processed, %d entries left in inbox/ and processing/ (%v)",
			processed, total, left, claimsIn(t, q))
	}
	for _, p := range procs {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.done:
			// The fenced hosts went on as new sessions: nothing failed.
			if code := p.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("%s exited %d at SIGTERM, want 0", p.h.name, code)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop within 30s of SIGTERM", p.h.name)
		}
	}
	for _, p := range logs {
		if p.exited() && p.cmd.ProcessState.ExitCode() > 0 {
			t.Errorf("a process on %s failed: exit %d", p.h.name, p.cmd.ProcessState.ExitCode())
		}
	}

	// The ledger: each message processed exactly once, nothing else.
	checkCount := func(what, query string, want int) {
		t.Helper()
		if n := count(t, admin, fmt.Sprintf(query, schema)); n != want {
			t.Errorf("%s: %d, want %d", what, n, want)
		}
	}
	checkCount("processed rows", "SELECT COUNT(*) FROM %s.processed", total)
	checkCount("distinct processed keys", "SELECT COUNT(DISTINCT msg_id) FROM %s.processed", total)
	checkCount("deliveries rows (duplicates or dead letters of messages delivered once)", "SELECT COUNT(*) FROM %s.deliveries", 0)
	checkCount("reservations left", "SELECT COUNT(*) FROM %s.reservations", 0)
	// A message's failed attempts are cleared by the commit that processes
	// it: an attempt left is a failure committed after that, by a host
	// whose claim had been taken over.
	checkCount("attempts left", "SELECT COUNT(*) FROM %s.attempts", 0)
	// The files: each message once in done/, nothing anywhere else.
	done := dirNames(t, filepath.Join(q, "done"))
	want := make([]string, total)
	for i := range want {
		want[i] = fmt.Sprintf("m%05d.json", i+1)
	}
	if !slices.Equal(done, want) {
		t.Errorf("done/: %d files, want the %d messages once each (first differences: %v)", len(done), total, firstDiff(done, want))
	}
	for _, stage := range []string{inbox, "processing", "error"} {
		if got := dirNames(t, filepath.Join(q, stage)); len(got) != 0 {
			t.Errorf("%s/ holds %v, want nothing", stage, got)
		}
	}

	// The downstream: every key called, and never twice at once but for a
	// request in flight when its host froze or was cut off.
	calls := srv.all()
	byKey := map[string][]hostCall{}
	for _, c := range calls {
		byKey[c.key] = append(byKey[c.key], c)
	}
	onTheWire := func(c hostCall) bool {
		for _, w := range windows {
			if c.host == w.host && !c.start.After(w.start) && !c.end.Before(w.start) {
				return true
			}
		}
		return false
	}
	repeats := 0
	for i := 1; i <= total; i++ {
		key := fmt.Sprintf("k%05d", i)
		cs := byKey[key]
		if len(cs) == 0 {
			t.Errorf("%s: never called", key)
			continue
		}
		repeats += len(cs) - 1
		for a := range cs {
			for b := a + 1; b < len(cs); b++ {
				x, y := cs[a], cs[b]
				if x.start.Before(y.end) && y.start.Before(x.end) && !onTheWire(x) && !onTheWire(y) {
					t.Errorf("%s: two requests in flight at once, from %s (%v-%v) and %s (%v-%v)",
						key, x.host, x.start.Format("15:04:05.000"), x.end.Format("15:04:05.000"),
						y.host, y.start.Format("15:04:05.000"), y.end.Format("15:04:05.000"))
				}
			}
		}
	}
	// A call is repeated only when its consumer died, froze or was cut off
	// between the call and the commit of its outcome: at most --concurrency
	// per such event.
	if bound := (kills + len(windows)) * conc; repeats > bound {
		t.Errorf("%d repeated requests, want at most %d (%d per kill, freeze or partition)", repeats, bound, conc)
	}
	t.Logf("%d requests for %d keys, %d repeated", len(calls), total, repeats)

	// The frozen and the cut-off host each lost their lease (or gave it
	// up, cut off), and said so once, then went on as a new session.
	for _, h := range []*netHost{frozen, cut} {
		var said, lost int
		for _, p := range logs {
			if p.h == h {
				// The messages, not their errors: a cut-off found by
				// recovery wraps its error in the same words.
				lost += strings.Count(p.stderr.String(), `msg="lost the lease`)
				said += strings.Count(p.stderr.String(), `msg="cut off from the ledger`)
			}
		}
		t.Logf("%s: %d times lost the lease, %d times cut off from the ledger", h.name, lost, said)
		said += lost
		if said != 1 {
			t.Errorf("%s logged %d times that it lost its lease, want once", h.name, said)
		}
	}
}

// waitLogged waits until p's stderr says one of what, for at most d.
func waitLogged(t *testing.T, p *hostProc, d time.Duration, what ...string) {
	t.Helper()
	logged := false
	poll(d, 50*time.Millisecond, func() bool {
		out := p.stderr.String()
		for _, w := range what {
			if strings.Contains(out, w) {
				logged = true
				return true
			}
		}
		return p.exited()
	})
	if !logged {
		t.Errorf("%s did not log any of %q within %v", p.h.name, what, d)
	}
}

// dirNames lists a directory's entries in name order.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Name()
	}
	return out
}

// claimsIn lists what processing/ holds but session directories: the
// claims inside them (not the sessions' own marks), and anything else.
func claimsIn(t *testing.T, q string) []string {
	t.Helper()
	var out []string
	proc := filepath.Join(q, "processing")
	for _, name := range dirNames(t, proc) {
		inside, err := os.ReadDir(filepath.Join(proc, name))
		if err != nil {
			out = append(out, name) // not a directory, or gone meanwhile
			continue
		}
		for _, e := range inside {
			if !strings.HasPrefix(e.Name(), ".") { // a session's marks are no claims
				out = append(out, name+"/"+e.Name())
			}
		}
	}
	return out
}

// firstDiff returns the first few names in one list and not the other.
func firstDiff(got, want []string) []string {
	var out []string
	for _, g := range got {
		if _, ok := slices.BinarySearch(want, g); !ok {
			out = append(out, "+"+g)
		}
	}
	for _, w := range want {
		if _, ok := slices.BinarySearch(got, w); !ok {
			out = append(out, "-"+w)
		}
	}
	return out[:min(len(out), 10)]
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
