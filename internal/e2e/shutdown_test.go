//go:build linux

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// Graceful shutdown: consume at SIGINT/SIGTERM stops
// claiming, finishes the calls and commits in flight, gives back what it
// had not called, and exits 0 with nothing of its own in processing/.

// shutdownQueue fills a queue with n valid messages, m%05d.json, and a
// dead letter (a missing field) every 100th, bad%05d.json, and returns the
// names of all of them.
func shutdownQueue(t *testing.T, n int) (q string, all []string) {
	t.Helper()
	q, _ = workQueue(t)
	for i := range n {
		name := fmt.Sprintf("m%05d.json", i)
		putMessage(t, q, name, orderMessage(fmt.Sprintf("m%05d", i), "A", i+1, "1.00"))
		all = append(all, name)
		if i%100 == 0 {
			name := fmt.Sprintf("bad%05d.json", i)
			putMessage(t, q, name, `{"msg_id":"bad`+strconv.Itoa(i)+`"}`)
			all = append(all, name)
		}
	}
	return q, all
}

// requireOneStage checks every message of all is in exactly one of done/,
// error/ and inbox/, under its own name, that processing/ is empty (no
// claim, no session directory), and returns how many are in each.
func requireOneStage(t *testing.T, q string, all []string) (inDone, inError, inInbox int) {
	t.Helper()
	where := map[string][]string{}
	for _, stage := range []string{done, errorStage, inbox} {
		for _, name := range names(t, q, stage) {
			where[name] = append(where[name], stage)
		}
	}
	for _, name := range all {
		switch w := where[name]; {
		case len(w) != 1:
			t.Errorf("%s is in %v, want exactly one of done/, error/, inbox/", name, w)
		case w[0] == done:
			inDone++
		case w[0] == errorStage:
			inError++
		default:
			inInbox++
		}
		delete(where, name)
	}
	for name, w := range where {
		t.Errorf("%s in %v is no message of the queue", name, w)
	}
	if ps := names(t, q, processing); len(ps) != 0 {
		t.Errorf("processing/ holds %q, want nothing", ps)
	}
	return inDone, inError, inInbox
}

// processedIDs returns the msg_ids of the ledger's processed rows, and
// fails the test if one is there twice.
func processedIDs(t *testing.T, l callLedger) map[string]bool {
	t.Helper()
	rows, err := l.db.Query("SELECT msg_id FROM " + l.table("processed"))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		if ids[id] {
			t.Errorf("msg_id %s processed twice", id)
		}
		ids[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestShutdownGraceful sends SIGTERM to a drain, and to a watcher, of
// hundreds of messages (thousands with SPOOL_TEST_LONG=1) with --post
// calls in flight (a server answering in
// 50 ms, 8 at once). Each must exit 0, leave processing/ empty and every
// message in one stage, with each call the server saw committed once (no
// call made and forgotten, none made twice), and give back the claims it
// had reserved but not called; a second run then finishes the queue
// without calling any msg_id again.
func TestShutdownGraceful(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"drain", "watch"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			n := testenv.Pick(3000, 300)
			q, all := shutdownQueue(t, n)
			l := sqliteEngine.open(t, q)
			srv := newCallServer(t, 50*time.Millisecond)
			args := []string{"consume", q, "--post", srv.URL, "--concurrency", "8"}
			if mode == "watch" {
				args = append(args, "--watch")
			}
			p := start(t, args...)
			if !srv.waitInFlight(8, cmdTimeout) {
				t.Fatalf("8 calls never were in flight at once\n%s", p.wait(t))
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			r := p.wait(t)
			if r.code != 0 {
				t.Fatalf("after SIGTERM: want exit 0\n%s", r)
			}
			for _, want := range []string{"signal: stopping", "signal=terminated", "given back to inbox/"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr does not say %q\n%s", want, r.stderr)
				}
			}
			inDone, inError, inInbox := requireOneStage(t, q, all)
			t.Logf("SIGTERM left done/ %d, error/ %d, inbox/ %d", inDone, inError, inInbox)
			if inInbox == 0 {
				t.Errorf("inbox/ is empty: the SIGTERM did not stop the %s half-way", mode)
			}
			st := parseStats(t, r)
			ids := processedIDs(t, l)
			if st.Processed != len(ids) || len(ids) != inDone {
				t.Errorf("summary processed=%d, ledger %d rows, done/ %d: want the same", st.Processed, len(ids), inDone)
			}
			if got := l.count(t, "SELECT COUNT(*) FROM %[3]s"); got != 0 {
				t.Errorf("%d reservations left after the stop, want none", got)
			}
			if got := l.count(t, "SELECT COUNT(*) FROM %[4]s"); got != 0 {
				t.Errorf("%d attempts counted, want none", got)
			}
			seen, _ := srv.seen(t)
			for key, k := range seen {
				if k != 1 {
					t.Errorf("the server saw key %s %d times, want once", key, k)
				}
				if !ids[key] {
					t.Errorf("key %s was called and its outcome not committed", key)
				}
			}
			if len(seen) != len(ids) {
				t.Errorf("the server saw %d keys, the ledger processed %d", len(seen), len(ids))
			}

			// The rest, by a second run: no msg_id is called twice.
			mustRun(t, 0, "consume", q, "--post", srv.URL, "--concurrency", "8")
			checkCallsDone(t, q, l, all, n, srv)
		})
	}
}

// checkCallsDone checks a queue of shutdownQueue's ends consumed, each
// valid msg_id processed and called exactly once.
func checkCallsDone(t *testing.T, q string, l callLedger, all []string, n int, srv *callServer) {
	t.Helper()
	inDone, inError, inInbox := requireOneStage(t, q, all)
	if inDone != n || inInbox != 0 || inError != len(all)-n {
		t.Errorf("done/ %d, error/ %d, inbox/ %d; want %d, %d, 0", inDone, inError, inInbox, n, len(all)-n)
	}
	if ids := processedIDs(t, l); len(ids) != n {
		t.Errorf("%d msg_ids processed, want %d", len(ids), n)
	}
	if got := l.count(t, "SELECT COUNT(*) FROM %[3]s"); got != 0 {
		t.Errorf("%d reservations left, want none", got)
	}
	if srv == nil {
		return
	}
	seen, _ := srv.seen(t)
	if len(seen) != n {
		t.Errorf("the server saw %d keys, want %d", len(seen), n)
	}
	for key, k := range seen {
		if k != 1 {
			t.Errorf("the server saw key %s %d times, want once", key, k)
		}
	}
}

// TestShutdownSecondSignal: a second SIGTERM while the first stop waits
// for slow calls exits at once, 143, and the next run recovers everything:
// the claims of the dead session and its reservations.
func TestShutdownSecondSignal(t *testing.T) {
	t.Parallel()
	n := testenv.Pick(1000, 300)
	q, all := shutdownQueue(t, n)
	l := sqliteEngine.open(t, q)
	slow := newCallServer(t, 5*time.Second) // the first stop waits for these
	// STOPPING=1 says the first signal was taken: two signals sent at once
	// could reach the process as one.
	addr, got := notifySocket(t, false)
	p := spoolAt{bin: spoolBin, env: []string{"NOTIFY_SOCKET=" + addr}}.start(t, "consume", q, "--post", slow.URL, "--concurrency", "8", "--post-timeout", "6s")
	if !slow.waitInFlight(8, cmdTimeout) {
		t.Fatalf("8 calls never were in flight at once\n%s", p.wait(t))
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	receive(t, got, "STOPPING=1")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 128+int(syscall.SIGTERM) {
		t.Fatalf("after a second SIGTERM: want exit %d at once\n%s", 128+int(syscall.SIGTERM), r)
	}
	if !strings.Contains(r.stderr, "second signal") {
		t.Errorf("stderr does not log the second signal\n%s", r.stderr)
	}
	if countClaims(t, q) == 0 {
		t.Errorf("processing/ is empty: the second signal did not exit at once")
	}
	fast := newCallServer(t, 0)
	// It holds the killed run's msg_ids for that run's post timeout,
	// recorded with their reservations, for their first requests may
	// still run at the server: 6 s, not the default 30.
	r = mustRun(t, 0, "consume", q, "--post", fast.URL, "--concurrency", "8")
	if st := parseStats(t, r); st.Recovered == 0 {
		t.Errorf("the next run recovered nothing\n%s", r)
	}
	checkCallsDone(t, q, l, all, n, nil)
}

// TestShutdownTimeout: with a server that never answers, the stop cancels
// the calls at --shutdown-timeout and exits 4; nothing of them is
// recorded, no attempt counted. Their requests may still run at the
// server, so their claims stay in processing/ and their msg_ids reserved,
// as a kill leaves them, while every message never called is back in
// inbox/. The next run recovers them, holds them for the stopped run's
// --post-timeout, recorded with their reservations (nothing can prove an
// HTTP request over sooner), and consumes everything.
func TestShutdownTimeout(t *testing.T) {
	t.Parallel()
	n := 200
	q, all := shutdownQueue(t, n)
	l := sqliteEngine.open(t, q)
	srv := newCallServer(t, 0)
	hold := make(chan struct{})
	var once sync.Once
	unhold := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(unhold) // before the server's Close, which waits for its handlers
	srv.mu.Lock()
	srv.answer = func(string, int) (int, string) { <-hold; return 0, "" }
	srv.mu.Unlock()
	// The post timeout, beyond the stop's 1 s, is the next run's hold.
	p := start(t, "consume", q, "--post", srv.URL, "--concurrency", "8", "--shutdown-timeout", "1s", "--post-timeout", "4s")
	if !srv.waitInFlight(8, cmdTimeout) {
		t.Fatalf("8 calls never were in flight at once\n%s", p.wait(t))
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 4 {
		t.Fatalf("a stop that cancelled calls: want exit 4\n%s", r)
	}
	for _, want := range []string{"shutdown timeout", "signal=interrupt", "calls cut short, held for recovery", "calls=8"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q\n%s", want, r.stderr)
		}
	}
	if got := countClaims(t, q); got != 8 {
		t.Errorf("processing/ holds %d claims, want the 8 calls cut short", got)
	}
	if got := countNames(t, q, done); got != 0 {
		t.Errorf("done/ holds %d, want nothing", got)
	}
	if got := countNames(t, q, inbox); got != n-8 {
		t.Errorf("inbox/ holds %d, want every valid message but the 8 cut short (%d)", got, n-8)
	}
	for what, want := range map[string]struct {
		query string
		n     int
	}{
		"processed rows": {"SELECT COUNT(*) FROM %[1]s", 0}, "reservations": {"SELECT COUNT(*) FROM %[3]s", 8},
		"attempts": {"SELECT COUNT(*) FROM %[4]s", 0},
	} {
		if got := l.count(t, want.query); got != want.n {
			t.Errorf("%s: %d after the cancelled calls, want %d", what, got, want.n)
		}
	}
	// The next run recovers the 8, holds them for the stopped run's call
	// bound, and consumes everything.
	unhold()
	r = mustRun(t, 0, "consume", q, "--post", srv.URL, "--concurrency", "8")
	if st := parseStats(t, r); st.Recovered != 8 || st.Processed != n {
		t.Errorf("next run: recovered %d, processed %d; want 8 and %d", st.Recovered, st.Processed, n)
	}
	if !strings.Contains(r.stderr, "holding the msg_ids whose calls a dead consumer may still be running") {
		t.Errorf("the next run does not say it holds the msg_ids cut short\n%s", r.stderr)
	}
	checkCallsDone(t, q, l, all, n, nil)
}

// notifySocket listens on a unixgram socket, a path or an abstract one,
// as systemd does for a Type=notify service, and returns its address for
// NOTIFY_SOCKET and the datagrams it receives.
func notifySocket(t *testing.T, abstract bool) (string, <-chan string) {
	t.Helper()
	addr := filepath.Join(t.TempDir(), "notify")
	if abstract {
		var rnd [8]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			t.Fatal(err)
		}
		addr = "@spool-test-" + hex.EncodeToString(rnd[:])
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	got := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				close(got)
				return
			}
			got <- string(buf[:k])
		}
	}()
	return addr, got
}

// receive waits for the next datagram holding want, failing the test
// after cmdTimeout.
func receive(t *testing.T, got <-chan string, want string) string {
	t.Helper()
	deadline := time.After(cmdTimeout)
	for {
		select {
		case m, ok := <-got:
			if !ok {
				t.Fatalf("the notify socket closed before %q", want)
			}
			if slices.Contains(strings.Split(m, "\n"), want) {
				return m
			}
		case <-deadline:
			t.Fatalf("no %q on the notify socket within %v", want, cmdTimeout)
		}
	}
}

// TestShutdownSDNotify: with NOTIFY_SOCKET set (a path, and an abstract
// socket), consume --watch sends READY=1 once it consumes, after it
// recovered the claims of a consumer killed before it, and STOPPING=1 at
// SIGTERM, with STATUS= lines; and the variable does not reach its
// handlers.
func TestShutdownSDNotify(t *testing.T) {
	t.Parallel()
	for _, abstract := range []bool{false, true} {
		t.Run(fmt.Sprintf("abstract=%v", abstract), func(t *testing.T) {
			t.Parallel()
			q, all := shutdownQueue(t, 100)
			srv := newCallServer(t, 5*time.Second)
			// A consumer killed with calls in flight leaves its session.
			// Its call timeout is short, and so is the next run's: that
			// run holds the messages the dead one was calling until its
			// own call timeout has passed (30s by default).
			dead := start(t, "consume", q, "--post", srv.URL, "--concurrency", "2", "--post-timeout", "2s")
			if !srv.waitInFlight(2, cmdTimeout) {
				t.Fatalf("no calls in flight\n%s", dead.wait(t))
			}
			if !dead.killAfter(t, 0) {
				t.Fatal("the consumer to kill had exited")
			}
			orphans := names(t, q, processing)
			if len(orphans) != 1 {
				t.Fatalf("processing/ holds %q, want the killed consumer's session", orphans)
			}
			addr, got := notifySocket(t, abstract)
			env := filepath.Join(t.TempDir(), "env")
			p := spoolAt{bin: spoolBin, env: []string{"NOTIFY_SOCKET=" + addr}}.start(t,
				"consume", q, "--watch", "--exec", "env >> "+shellQuote(env), "--exec-timeout", "2s")
			ready := receive(t, got, "READY=1")
			if _, err := os.Stat(filepath.Join(q, processing, orphans[0])); !os.IsNotExist(err) {
				t.Errorf("READY=1 before the dead session %s was recovered (stat: %v)", orphans[0], err)
			}
			if !strings.Contains(ready, "STATUS=consuming ") {
				t.Errorf("READY=1 without a STATUS= line: %q", ready)
			}
			// The backlog consumed, then SIGTERM.
			poll(cmdTimeout, 10*time.Millisecond, func() bool {
				return countNames(t, q, done)+countNames(t, q, errorStage) >= len(all)
			})
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			stopping := receive(t, got, "STOPPING=1")
			if !strings.Contains(stopping, "STATUS=stopping") {
				t.Errorf("STOPPING=1 without a STATUS= line: %q", stopping)
			}
			r := p.wait(t)
			if r.code != 0 || strings.Contains(r.stderr, "NOTIFY_SOCKET") || strings.Contains(r.stderr, "sd_notify") {
				t.Fatalf("want exit 0 without a notify warning\n%s", r)
			}
			requireOneStage(t, q, all)
			out, err := os.ReadFile(env)
			if err != nil {
				t.Fatalf("%v\n%s", err, r)
			}
			if strings.Contains(string(out), "NOTIFY_SOCKET=") {
				t.Errorf("a handler inherited NOTIFY_SOCKET")
			}
		})
	}
}

// TestShutdownHungLedger: a stop that the shutdown timeout cannot end, a
// commit of outcomes blocked in PostgreSQL behind a table lock someone
// else holds, still ends: at --shutdown-timeout and its grace the process
// exits 4, while the lock is still held. The next run, the lock gone,
// recovers the claims; each valid message ends processed once, and at most
// --concurrency calls (those whose outcome was never committed) were made
// again.
func TestShutdownHungLedger(t *testing.T) {
	t.Parallel()
	const (
		n           = 100
		concurrency = 4
	)
	q, all := shutdownQueue(t, n)
	l := postgresEngine.open(t, q)
	srv := newCallServer(t, 0)
	hold := make(chan struct{})
	var once sync.Once
	unhold := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(unhold)
	srv.mu.Lock()
	srv.answer = func(string, int) (int, string) { <-hold; return 0, "" }
	srv.mu.Unlock()
	// The post timeout, beyond the stop's 1 s, is the next run's hold of
	// the calls cut short.
	args := append([]string{"consume", q, "--post", srv.URL, "--concurrency", strconv.Itoa(concurrency), "--shutdown-timeout", "1s", "--post-timeout", "4s"}, l.args...)
	p := start(t, args...)
	if !srv.waitInFlight(concurrency, cmdTimeout) {
		t.Fatalf("%d calls never were in flight at once\n%s", concurrency, p.wait(t))
	}
	// The outcomes of these calls cannot commit while the lock is held.
	lock, err := l.db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	if _, err := lock.Exec("LOCK TABLE " + l.table("processed") + " IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	unhold()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	r := p.wait(t)
	took := time.Since(began)
	if r.code != 4 {
		t.Fatalf("a stop blocked in the ledger: want exit 4 after the timeout and its grace\n%s", r)
	}
	if !strings.Contains(r.stderr, "after the shutdown timeout and its grace") {
		t.Errorf("stderr does not say why it exited\n%s", r.stderr)
	}
	if took < time.Second {
		t.Errorf("exited %v after the signal, before the 1s shutdown timeout", took)
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	r = mustRun(t, 0, append([]string{"consume", q, "--post", srv.URL, "--concurrency", strconv.Itoa(concurrency)}, l.args...)...)
	if st := parseStats(t, r); st.Recovered == 0 {
		t.Errorf("the next run recovered nothing\n%s", r)
	}
	checkCallsDone(t, q, l, all, n, nil)
	seen, _ := srv.seen(t)
	again := 0
	for key, k := range seen {
		if k > 1 {
			again += k - 1
		}
		if k > 2 {
			t.Errorf("key %s called %d times", key, k)
		}
	}
	if len(seen) != n || again > concurrency {
		t.Errorf("the server saw %d keys, %d calls made again; want %d keys, at most %d again", len(seen), again, n, concurrency)
	}
}
