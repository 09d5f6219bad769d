//go:build linux

package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// The Redis dedup window (--dedup): duplicates inside it are absorbed
// without a ledger write, a key in flight on another consumer waits, and a
// Redis outage degrades to the ledger alone. Each test runs a private
// redis-server of its own, on a port of its own, so that it can kill it.

// redisServer is a private redis-server: no persistence, loopback only.
type redisServer struct {
	t    *testing.T
	port int
	dir  string
	cmd  *exec.Cmd
}

// startRedis starts a private redis-server on a free port; a missing
// binary skips the test, or fails it when CI=true (.ci/run installs it).
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		testenv.Missing(t, "redis-server is not installed (apt-get install redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r := &redisServer{t: t, port: port, dir: t.TempDir()}
	r.start()
	t.Cleanup(r.kill)
	return r
}

// url is the window's --dedup URL, database 3.
func (r *redisServer) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/3", r.port) }

// start (re)starts the server on its port and waits until it answers.
func (r *redisServer) start() {
	r.t.Helper()
	r.cmd = exec.Command("redis-server", "--port", fmt.Sprint(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir, "--logfile", filepath.Join(r.dir, "log"))
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	var err error
	if !poll(10*time.Second, 50*time.Millisecond, func() bool {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.port), time.Second); err != nil {
			return false
		}
		defer c.Close()
		_, _ = c.Write([]byte("PING\r\n"))
		buf := make([]byte, 16)
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		n, _ := c.Read(buf)
		return strings.HasPrefix(string(buf[:n]), "+PONG")
	}) {
		r.t.Fatalf("redis-server on port %d does not answer: %v", r.port, err)
	}
}

// kill ends the server with SIGKILL, as a crash would.
func (r *redisServer) kill() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		_ = r.cmd.Wait()
		r.cmd = nil
	}
}

// dedupState is what a window test checks in the ledger and the queue
// once it is drained: I1-I5 and I7 with absorbed duplicates, which have
// no delivery row.
type dedupState struct {
	processed, dupRows, deadRows int
}

// checkDedupFinal checks a drained queue whose valid msg_ids are bodies
// (each delivered once or more, under distinct names) and whose
// redeliveries were recorded as duplicates or absorbed: every file in
// done/, none in inbox/ or processing/; one processed row per msg_id with
// its content; delivery rows only of files in done/ (one each, by inode)
// and duplicates recorded plus absorbed equal to the redeliveries; fsck
// finds nothing. It returns the ledger's counts.
func checkDedupFinal(t *testing.T, q string, bodies map[string]string, files, absorbed int) dedupState {
	t.Helper()
	requireEmpty(t, q, processing)
	if left := messages(t, q, inbox); len(left) > 0 {
		t.Errorf("inbox/ holds %d messages, want none", len(left))
	}
	fs := messages(t, q, done)
	if len(fs) != files {
		t.Errorf("I1: done/ holds %d files, %d were delivered", len(fs), files)
	}
	if e := messages(t, q, errorStage); len(e) > 0 {
		t.Errorf("error/ holds %d files, want none", len(e))
	}
	db := openLedger(t, q)
	rows := processedRows(t, db)
	if len(rows) != len(bodies) {
		t.Errorf("I2: %d processed rows, want %d", len(rows), len(bodies))
	}
	for id, b := range bodies {
		if r, ok := rows[id]; !ok || r.Hash != sha256hex([]byte(b)) {
			t.Errorf("I2: msg_id %s: processed row %+v (found %v), want the hash of its content", id, r, ok)
		}
	}
	byIno := map[uint64]int{}
	for _, d := range deliveries(t, db) {
		byIno[d.Ino]++
	}
	inDone := map[uint64]bool{}
	for _, f := range fs {
		inDone[f.Ino] = true
		if byIno[f.Ino] > 1 {
			t.Errorf("I7: done/%s has %d delivery records", f.Name, byIno[f.Ino])
		}
	}
	for ino := range byIno {
		if !inDone[ino] {
			t.Errorf("a delivery record names inode %d, which no file in done/ has", ino)
		}
	}
	st := dedupState{
		processed: len(rows),
		dupRows:   count(t, db, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'duplicate'`),
		deadRows:  count(t, db, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter'`),
	}
	if redelivered := files - len(bodies); st.dupRows+absorbed != redelivered {
		t.Errorf("I7: %d duplicates recorded + %d absorbed by the window, want the %d redeliveries", st.dupRows, absorbed, redelivered)
	}
	if rep := fsck(t, 0, q); len(rep.kinds()) > 0 {
		t.Errorf("fsck finds %v in a queue whose duplicates the window absorbed", rep.kinds())
	}
	return st
}

// TestDedupAbsorbs: redeliveries of processed msg_ids inside the window
// are duplicates that leave the ledger untouched (not a row is written),
// while a redelivery with other content still reaches the ledger, which
// records the conflict. Without --dedup the same redeliveries are
// duplicate rows: the control that shows the check can fail.
func TestDedupAbsorbs(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	for _, window := range []bool{true, false} {
		t.Run(fmt.Sprintf("window=%v", window), func(t *testing.T) {
			q, _ := workQueue(t)
			args := []string{"consume", q}
			if window {
				args = append(args, "--dedup", r.url())
			}
			n := 60
			bodies := map[string]string{}
			for i := range n {
				id := fmt.Sprintf("m-%03d", i)
				bodies[id] = orderMessage(id, fmt.Sprintf("o%03d", i), 1, "1.00")
				putMessage(t, q, fmt.Sprintf("a%03d.json", i), bodies[id])
			}
			requireStats(t, "first drain", mustRun(t, 0, args...), consumeStats{Processed: n})
			db := openLedger(t, q)
			rowsBefore := count(t, db, `SELECT (SELECT COUNT(*) FROM processed) + (SELECT COUNT(*) FROM deliveries)`)
			for id, b := range bodies {
				putMessage(t, q, "again-"+id+".json", b)
			}
			requireStats(t, "redeliveries", mustRun(t, 0, args...), consumeStats{Duplicates: n})
			rowsAfter := count(t, db, `SELECT (SELECT COUNT(*) FROM processed) + (SELECT COUNT(*) FROM deliveries)`)
			absorbed := 0
			if window {
				absorbed = n
				if rowsAfter != rowsBefore {
					t.Errorf("the ledger's rows went from %d to %d for %d duplicates the window knew: want no ledger write", rowsBefore, rowsAfter, n)
				}
			} else if rowsAfter != rowsBefore+n {
				t.Errorf("without a window, %d duplicates took the ledger's rows from %d to %d, want one row each", n, rowsBefore, rowsAfter)
			}
			st := checkDedupFinal(t, q, bodies, 2*n, absorbed)
			if window && st.dupRows != 0 {
				t.Errorf("%d duplicate rows with the window, want 0", st.dupRows)
			}
			// Same msg_id, other content: never absorbed.
			var id string
			for id = range bodies {
				break
			}
			putMessage(t, q, "changed.json", orderMessage(id, "other", 1, "2.00"))
			requireStats(t, "conflict", mustRun(t, 0, args...), consumeStats{Duplicates: 1})
			if c := count(t, db, `SELECT COUNT(*) FROM deliveries WHERE conflict = 1`); c != 1 {
				t.Errorf("a redelivery with other content: %d conflicts recorded, want 1", c)
			}
		})
	}
}

// TestDedupInFlightOneCall: two consumers on one key in flight. The first
// posts it (a slow endpoint); a redelivery of it arrives meanwhile and a
// second consumer claims it, which finds the key in flight in the window
// and holds it; once the first has committed, it is absorbed as a
// duplicate: the endpoint sees one call.
func TestDedupInFlightOneCall(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	q, _ := workQueue(t)
	srv := newCallServer(t, 100*time.Millisecond)
	// The first call lasts until the second consumer has claimed the
	// redelivery, however slow the machine: a fixed latency once let the
	// first consumer finish and take the redelivery on its next pass.
	put := make(chan struct{})
	srv.onFirst = func(string) error {
		<-put
		var claims []string
		if !poll(cmdTimeout, 10*time.Millisecond, func() bool {
			claims, _ = filepath.Glob(filepath.Join(q, processing, "*", "again.json"))
			return len(claims) == 1
		}) {
			return fmt.Errorf("the second consumer never claimed the redelivery")
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(claims[0]), "first.json")); err == nil {
			return fmt.Errorf("the first consumer claimed the redelivery itself")
		}
		return nil
	}
	body := orderMessage("k-1", "o-1", 1, "1.00")
	putMessage(t, q, "first.json", body)
	a := start(t, "consume", q, "--post", srv.URL, "--dedup", r.url())
	if !srv.waitInFlight(1, cmdTimeout) {
		t.Fatalf("the first consumer's call never arrived\n%s", a.result())
	}
	// The first consumer's pass listed inbox/ already: the redelivery is
	// the second's.
	putMessage(t, q, "again.json", body)
	close(put)
	b := start(t, "consume", q, "--post", srv.URL, "--dedup", r.url())
	ra, rb := a.wait(t), b.wait(t)
	if ra.code != 0 || rb.code != 0 {
		t.Fatalf("a consumer failed:\n%s\n%s", ra, rb)
	}
	srv.mu.Lock()
	errs := srv.errs
	srv.mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("%v\n%s\n%s", errs, ra, rb)
	}
	// The second consumer held the redelivery while the first call was
	// in flight (onFirst saw its claim), then put it back to inbox/ to
	// claim it again: whichever consumer's next pass takes it absorbs it
	// (a loaded machine once gave it to the first). One call, one
	// processed row and one duplicate between them is the rule.
	sa, sb := parseStats(t, ra), parseStats(t, rb)
	if sum := (consumeStats{Processed: sa.Processed + sb.Processed, Duplicates: sa.Duplicates + sb.Duplicates, DeadLetters: sa.DeadLetters + sb.DeadLetters}); sum != (consumeStats{Processed: 1, Duplicates: 1}) || sa.Processed != 1 {
		t.Errorf("the consumers: %+v and %+v, want the first to process k-1 and one of them to absorb its redelivery\n%s\n%s", sa, sb, ra, rb)
	}
	seen, _ := srv.seen(t)
	if seen["k-1"] != 1 || len(seen) != 1 {
		t.Errorf("the endpoint saw %v, want k-1 once", seen)
	}
	checkDedupFinal(t, q, map[string]string{"k-1": body}, 2, 1)
}

// TestDedupRedisOutage: a watching consumer with --dedup while its Redis
// is killed mid-run (SIGKILL, with messages and redeliveries arriving)
// and restarted. Consumption never stops; the ledger alone decides during
// the outage (one warning, spool_dedup_window_errors_total counted), and
// the window is used again once Redis is back (absorbed grows again). The
// queue and the ledger end exact: one processed row per msg_id, every
// redelivery a duplicate, recorded or absorbed, fsck clean.
func TestDedupRedisOutage(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	q, _ := workQueue(t)
	p, base := startListening(t, "consume", q, "--watch", "--dedup", r.url(), "--listen", "127.0.0.1:0", "--log-level", "info")
	bodies := map[string]string{}
	files := 0
	put := func(from, to int) { // messages from..to-1, each once
		for i := from; i < to; i++ {
			id := fmt.Sprintf("m-%04d", i)
			bodies[id] = orderMessage(id, fmt.Sprintf("o-%04d", i), 1, "1.00")
			putMessage(t, q, id+".json", bodies[id])
			files++
		}
	}
	again := func(from, to int, tag string) {
		for i := from; i < to; i++ {
			id := fmt.Sprintf("m-%04d", i)
			putMessage(t, q, id+"-"+tag+".json", bodies[id])
			files++
		}
	}
	waitDone := func(what string) {
		t.Helper()
		if !poll(cmdTimeout, 50*time.Millisecond, func() bool { return len(messages(t, q, done)) >= files }) {
			t.Fatalf("%s: done/ holds %d of %d files\n%s", what, len(messages(t, q, done)), files, p.result())
		}
	}
	metric := func(name string) float64 {
		v, _ := scrapeMetrics(t, base).value(name)
		return v
	}

	put(0, 100)
	waitDone("before the outage")
	again(0, 50, "a")
	waitDone("redeliveries before the outage")
	if got := metric("spool_dedup_window_absorbed_total"); got != 50 {
		t.Errorf("absorbed before the outage: %v, want 50", got)
	}

	// Killed while messages and redeliveries arrive.
	stop := make(chan struct{})
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		select {
		case <-time.After(150 * time.Millisecond):
		case <-stop:
		}
		r.kill()
	}()
	put(100, 200)
	again(50, 100, "b")
	<-killed
	close(stop)
	again(100, 150, "c")
	put(200, 300)
	waitDone("during the outage")
	if got := metric("spool_dedup_window_errors_total"); got < 1 {
		t.Errorf("spool_dedup_window_errors_total = %v during the outage, want at least 1", got)
	}

	// Back (empty: it kept nothing), and used again.
	r.start()
	time.Sleep(1500 * time.Millisecond) // past the consumer's retry interval
	put(300, 350)
	waitDone("after the restart")
	before := metric("spool_dedup_window_absorbed_total")
	again(300, 350, "d")
	waitDone("redeliveries after the restart")
	if got := metric("spool_dedup_window_absorbed_total") - before; got != 50 {
		t.Errorf("absorbed after Redis came back: %v, want 50 (the window is used again)", got)
	}
	absorbed := int(metric("spool_dedup_window_absorbed_total"))
	errs := metric("spool_dedup_window_errors_total")

	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	res := p.wait(t)
	if res.code != 0 {
		t.Fatalf("consume --watch exited %d\n%s", res.code, res)
	}
	if n := strings.Count(res.stderr, "dedup window unavailable"); n != 1 {
		t.Errorf("%d warnings of the outage on stderr, want 1\n%s", n, res.stderr)
	}
	if n := strings.Count(res.stderr, "dedup window answers again"); n != 1 {
		t.Errorf("%d notes of the window answering again, want 1", n)
	}
	st := checkDedupFinal(t, q, bodies, files, absorbed)
	t.Logf("%d files, %d msg_ids: %d duplicates absorbed, %d recorded; %v window errors", files, len(bodies), absorbed, st.dupRows, errs)
	if st.dupRows == 0 {
		t.Errorf("no duplicate was recorded in the ledger: the outage did not leave the ledger alone to decide")
	}
}

// TestDedupBadURL: a --dedup (or SPOOL_DEDUP) that is no Redis URL is one
// line and exit 2, with nothing claimed nor recorded.
func TestDedupBadURL(t *testing.T) {
	t.Parallel()
	q, _ := workQueue(t)
	putMessage(t, q, "a.json", orderMessage("m-1", "o-1", 1, "1.00"))
	for _, u := range []string{"http://127.0.0.1:6379/0", "redis://127.0.0.1:6379/x", "redis://127.0.0.1:6379/0?ttl=0s"} {
		before := treeSnapshot(t, q)
		requireRefusal(t, run(t, "consume", q, "--dedup", u), before, []string{q}, "--dedup", "want redis://HOST:PORT/DB")
	}
	before := treeSnapshot(t, q)
	r := spoolAt{bin: spoolBin, env: []string{"SPOOL_DEDUP=redis://"}}.run(t, "consume", q)
	requireRefusal(t, r, before, []string{q}, "set by SPOOL_DEDUP")
}

// TestDedupGivenBackReleased: a consumer stopped by SIGTERM with one call
// in flight and the rest of its batch reserved but not called gives those
// claims back to inbox/ and deletes their in-flight keys from the window
// with them, so that the next consumer (here at once, on any host) calls
// them instead of waiting for the keys' in-flight TTL; the one called is
// done in the window. The next run calls each of the others once.
func TestDedupGivenBackReleased(t *testing.T) {
	t.Parallel()
	r := startRedis(t)
	q, _ := workQueue(t)
	srv := newCallServer(t, time.Second)
	bodies := map[string]string{}
	for i := range 5 {
		id := fmt.Sprintf("k-%d", i)
		bodies[id] = orderMessage(id, "o-"+id, 1, "1.00")
		putMessage(t, q, id+".json", bodies[id])
	}
	// The window's in-flight TTL is far longer than the test: a key left
	// behind is seen, not expired.
	url := r.url() + "?inflight=10m"
	p := start(t, "consume", q, "--post", srv.URL, "--concurrency", "1", "--dedup", url)
	if !srv.waitInFlight(1, cmdTimeout) {
		t.Fatalf("no call arrived\n%s", p.result())
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if res := p.wait(t); res.code != 0 || !strings.Contains(res.stderr, "given back to inbox/") {
		t.Fatalf("after SIGTERM: want exit 0 and claims given back\n%s", res)
	}
	given := countNames(t, q, inbox)
	if given == 0 {
		t.Fatal("the SIGTERM gave nothing back: nothing was reserved uncalled")
	}
	vals := r.values(t)
	inFlight, doneKeys := 0, 0
	for k, v := range vals {
		switch {
		case strings.HasPrefix(v, "o:"):
			inFlight++
			t.Errorf("window key %s is still in flight (%s) after its claim was given back", k, v)
		case strings.HasPrefix(v, "d:"):
			doneKeys++
		}
	}
	if inFlight > 0 {
		t.FailNow() // the next run would wait for the keys' TTL
	}
	if doneKeys+given != len(bodies) {
		t.Errorf("window holds %d done keys and %d in flight, inbox/ %d given back: want the called ones done and the rest gone", doneKeys, inFlight, given)
	}
	res := mustRun(t, 0, "consume", q, "--post", srv.URL, "--dedup", url)
	requireStats(t, "the next run", res, consumeStats{Processed: given})
	seen, _ := srv.seen(t)
	for id := range bodies {
		if seen[id] != 1 {
			t.Errorf("the endpoint saw %s %d times, want once", id, seen[id])
		}
	}
}

// values returns every key of the window's database (3) with its value,
// over the Redis protocol itself (KEYS is fine on a test's private server).
func (r *redisServer) values(t *testing.T) map[string]string {
	t.Helper()
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", r.port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	rd := bufio.NewReader(c)
	do := func(args ...string) []string {
		fmt.Fprintf(c, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(c, "$%d\r\n%s\r\n", len(a), a)
		}
		return readRESP(t, rd)
	}
	do("SELECT", "3")
	out := map[string]string{}
	for _, k := range do("KEYS", "*") {
		if v := do("GET", k); len(v) == 1 {
			out[k] = v[0]
		}
	}
	return out
}

// readRESP reads one reply of the kinds KEYS, GET and SELECT give: a
// simple string, a bulk string (nil: none) or an array of bulk strings.
func readRESP(t *testing.T, rd *bufio.Reader) []string {
	t.Helper()
	line, err := rd.ReadString('\n')
	if err != nil {
		t.Fatalf("redis reply: %v", err)
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		t.Fatal("redis reply: empty line")
	}
	bulk := func(n int) string {
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			t.Fatalf("redis reply: %v", err)
		}
		return string(buf[:n])
	}
	n, _ := strconv.Atoi(line[1:])
	switch line[0] {
	case '+':
		return []string{line[1:]}
	case '$':
		if n < 0 {
			return nil
		}
		return []string{bulk(n)}
	case '*':
		var out []string
		for range n {
			out = append(out, readRESP(t, rd)...)
		}
		return out
	}
	t.Fatalf("redis reply: %q", line)
	return nil
}
