//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// Batch files with a Caller (docs/DESIGN.md, "Batch files: the consumer"):
// each record is reserved, called and settled as a file message is, and
// the file's progress passes only records settled.

// TestBatchPost: a CSV file with bad rows and a repeated msg_id consumed
// with --post: every good record is posted once, with its msg_id as the
// Idempotency-Key; the bad rows are one-record dead letters named after
// their lines and never posted; the repeat is a duplicate, not posted.
func TestBatchPost(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv"}`)
	srv := newCallServer(t, time.Millisecond)
	data, badLines := ordersCSV(300, func(i int) bool { return i%37 == 0 })
	data = append(data, "m10,o10,10,10.10\n"...) // line 302: m10 again
	putBytes(t, q, "orders.csv", data)
	r := mustRun(t, 0, "consume", q, "--post", srv.URL, "--concurrency", "8")
	good := 300 - len(badLines)
	if st := parseStats(t, r); st != (consumeStats{Processed: good, Duplicates: 1, DeadLetters: len(badLines)}) {
		t.Fatalf("%+v, want %d processed, 1 duplicate, %d dead letters\n%s", st, good, len(badLines), r)
	}
	seen, most := srv.seen(t)
	if len(seen) != good {
		t.Fatalf("%d keys posted, want %d", len(seen), good)
	}
	for i := 1; i <= 300; i++ {
		key := "m" + strconv.Itoa(i)
		switch n := seen[key]; {
		case i%37 == 0 && n != 0:
			t.Fatalf("bad row %s posted %d times", key, n)
		case i%37 != 0 && n != 1:
			t.Fatalf("%s posted %d times, want once", key, n)
		}
	}
	if most > 8 {
		t.Fatalf("%d calls at once, want at most --concurrency 8", most)
	}
	requireOrdersDone(t, q, badLines)
	db := filepath.Join(q, "ledger.db")
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM processed WHERE msg_id = 'm5' AND file = 'orders.csv#L6'`); n != 1 {
		t.Fatal("m5 is not recorded from orders.csv#L6")
	}
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'duplicate' AND file = 'orders.csv#L302'`); n != 1 {
		t.Fatal("the repeated m10 is not recorded as a duplicate from orders.csv#L302")
	}
	wantFiles := []batchFileCounts{{"orders.csv", good, 1, len(badLines)}}
	if got := statusBatchFiles(t, spoolAt{bin: spoolBin}, q); !slices.Equal(got, wantFiles) {
		t.Fatalf("spool status shows batch files %+v, want %+v", got, wantFiles)
	}
	checkFsck(t, q)
}

// TestBatchPostFilesConcurrency: batch files consumed at once, by several
// examining workers, share --concurrency: never more calls at once in all.
func TestBatchPostFilesConcurrency(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv"}`)
	srv := newCallServer(t, 5*time.Millisecond)
	for f := range 3 {
		var b bytes.Buffer
		b.WriteString("msg_id,order_no,seq,amount\n")
		for i := 1; i <= 100; i++ {
			fmt.Fprintf(&b, "f%dm%d,o,%d,1.00\n", f, i, i)
		}
		putBytes(t, q, fmt.Sprintf("part%d.csv", f), b.Bytes())
	}
	r := mustRun(t, 0, "consume", q, "--post", srv.URL, "--concurrency", "4")
	if st := parseStats(t, r); st != (consumeStats{Processed: 300}) {
		t.Fatalf("%+v, want 300 processed\n%s", st, r)
	}
	seen, most := srv.seen(t)
	if len(seen) != 300 {
		t.Fatalf("%d keys posted, want 300", len(seen))
	}
	if most > 4 {
		t.Fatalf("%d calls at once across the files, want at most --concurrency 4", most)
	}
}

// TestBatchPostRetry: a record whose call fails transiently is retried on
// the retry policy's schedule, its attempts counted in the ledger, and
// processed by its second call; the file's other records go on meanwhile,
// far past what the consumer reads ahead of its calls (4 + 2 × 16).
func TestBatchPostRetry(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv"}`)
	srv := newCallServer(t, 0)
	srv.answer = func(key string, nth int) (int, string) {
		if key == "m3" && nth == 0 {
			return http.StatusServiceUnavailable, ""
		}
		return 0, ""
	}
	const records = 300
	data, _ := ordersCSV(records, func(int) bool { return false })
	putBytes(t, q, "orders.csv", data)
	r := mustRun(t, 0, "consume", q, "--post", srv.URL, "--retry-base", "1500ms", "--retry-jitter=false", "--retry-wait", "1m")
	if st := parseStats(t, r); st != (consumeStats{Processed: records}) {
		t.Fatalf("%+v, want 20 processed (m3 after its retry)\n%s", st, r)
	}
	srv.mu.Lock()
	starts := slices.Clone(srv.starts["m3"])
	srv.mu.Unlock()
	if len(starts) != 2 {
		t.Fatalf("m3 posted %d times, want twice", len(starts))
	}
	if gap := starts[1].Sub(starts[0]); gap < 1400*time.Millisecond {
		t.Fatalf("m3's retry came %v after its first call, want the policy's 1.5s", gap)
	}
	seen, _ := srv.seen(t)
	before := 0 // the other records posted before m3's retry
	srv.mu.Lock()
	for i := 1; i <= records; i++ {
		if k := "m" + strconv.Itoa(i); k != "m3" && len(srv.starts[k]) > 0 && srv.starts[k][0].Before(starts[1]) {
			before++
		}
	}
	srv.mu.Unlock()
	for i := 1; i <= records; i++ {
		if k := "m" + strconv.Itoa(i); k != "m3" && seen[k] != 1 {
			t.Fatalf("%s posted %d times, want once", k, seen[k])
		}
	}
	if before < 100 {
		t.Fatalf("%d other records posted before m3's retry: the file waited for it", before)
	}
	db := filepath.Join(q, "ledger.db")
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM processed WHERE msg_id = 'm3' AND file = 'orders.csv#L4'`); n != 1 {
		t.Fatal("m3 is not processed from orders.csv#L4")
	}
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM attempts`); n != 0 {
		t.Fatalf("%d attempts rows left: m3's must go with its success", n)
	}
	if !strings.Contains(r.stderr, "retry scheduled") || !strings.Contains(r.stderr, "attempt=1") {
		t.Fatalf("no retry of m3 logged with its attempt count\n%s", r)
	}
	if got := stageNames(t, q, done); !slices.Equal(got, []string{"orders.csv"}) {
		t.Fatalf("done/ holds %q", got)
	}
	checkFsck(t, q)
}

// TestBatchPostRetryDeferred: a drain leaves a record's retry that is not
// due within --retry-wait for a later run, as it leaves a file message's:
// the file goes back to inbox/ at its progress, the retry is reported
// (waiting-retries), and a drain before it is due calls nothing; the
// drain after it calls the record alone, the others absorbed.
func TestBatchPostRetryDeferred(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv", "done_file": "{name}.done"}`)
	srv := newCallServer(t, 0)
	srv.answer = func(key string, nth int) (int, string) {
		if key == "m3" && nth == 0 {
			return http.StatusServiceUnavailable, ""
		}
		return 0, ""
	}
	data, _ := ordersCSV(20, func(int) bool { return false })
	putBytes(t, q, "orders.csv", data)
	putBytes(t, q, "orders.csv.done", nil)
	args := []string{"consume", q, "--post", srv.URL, "--retry-base", "3s", "--retry-jitter=false"}
	r := mustRun(t, 0, args...)
	if st := parseStats(t, r); st != (consumeStats{Processed: 19}) || !strings.Contains(r.stdout, "waiting-retries=1 ") {
		t.Fatalf("%+v, want 19 processed and m3's retry waiting\n%s", st, r)
	}
	if got := stageNames(t, q, inbox); !slices.Equal(got, []string{"orders.csv", "orders.csv.done"}) {
		t.Fatalf("inbox/ holds %q, want the file back with its done-file", got)
	}
	started := time.Now()
	r = mustRun(t, 0, args...)
	if st := parseStats(t, r); st != (consumeStats{}) || !strings.Contains(r.stdout, "waiting-retries=1 ") {
		t.Fatalf("before the retry is due: %+v, want nothing done and m3 waiting\n%s", st, r)
	}
	if seen, _ := srv.seen(t); seen["m3"] != 1 || len(seen) != 20 {
		t.Fatalf("m3 posted %d times and %d keys before its retry is due, want once and 20", seen["m3"], len(seen))
	}
	if d := time.Since(started); d > 2500*time.Millisecond {
		t.Skipf("the second drain took %v: m3's retry may have fallen due during it", d)
	}
	time.Sleep(3 * time.Second) // the retry policy's delay, 3s without jitter
	r = mustRun(t, 0, args...)
	if st := parseStats(t, r); st != (consumeStats{Processed: 1}) {
		t.Fatalf("after the retry is due: %+v, want m3 processed\n%s", st, r)
	}
	seen, _ := srv.seen(t)
	for i := 1; i <= 20; i++ {
		want := 1
		if i == 3 {
			want = 2
		}
		if k := "m" + strconv.Itoa(i); seen[k] != want {
			t.Fatalf("%s posted %d times, want %d", k, seen[k], want)
		}
	}
	if got := stageNames(t, q, done); !slices.Equal(got, []string{"orders.csv", "orders.csv.done"}) {
		t.Fatalf("done/ holds %q", got)
	}
	checkFsck(t, q)
}

// TestBatchPostRetryWatch: in a watch, a file whose last record waits for
// its retry is held as a file message waiting for its retry is: a file
// arriving meanwhile is consumed at once, not after the retry; the held
// file is resumed when the retry is due, and its record processed.
func TestBatchPostRetryWatch(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv"}`)
	l := sqliteCallLedger(t, q)
	srv := newCallServer(t, 0)
	srv.answer = func(key string, nth int) (int, string) {
		if key == "m3" && nth == 0 {
			return http.StatusServiceUnavailable, ""
		}
		return 0, ""
	}
	data, _ := ordersCSV(5, func(int) bool { return false })
	putBytes(t, q, "orders.csv", data)
	p := start(t, "consume", q, "--watch", "--post", srv.URL, "--retry-base", "4s", "--retry-jitter=false")
	waitFor(t, cmdTimeout, "the four records not refused", func() bool {
		n, _ := ledgerProcessed(l)
		return n == 4
	})
	refused := time.Now()
	putBytes(t, q, "late.csv", []byte("msg_id,order_no,seq,amount\nlate1,o,1,1.00\n"))
	waitFor(t, cmdTimeout, "the late file's record", func() bool {
		return queryLedger(t, filepath.Join(q, "ledger.db"), `SELECT COUNT(*) FROM processed WHERE msg_id = 'late1'`) == 1
	})
	if d := time.Since(refused); d > 3*time.Second {
		t.Fatalf("the late file took %v, want it before m3's retry (4s): it waited for the retry", d)
	}
	waitFor(t, cmdTimeout, "m3 after its retry", func() bool {
		n, _ := ledgerProcessed(l)
		return n == 6
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t); r.code != 0 {
		t.Fatalf("the watch exited with a failure:\n%s", r)
	}
	seen, _ := srv.seen(t)
	for _, k := range []string{"m1", "m2", "m4", "m5", "late1"} {
		if seen[k] != 1 {
			t.Fatalf("%s posted %d times, want once", k, seen[k])
		}
	}
	if seen["m3"] != 2 {
		t.Fatalf("m3 posted %d times, want twice", seen["m3"])
	}
	if got := stageNames(t, q, done); !slices.Equal(got, []string{"late.csv", "orders.csv"}) {
		t.Fatalf("done/ holds %q", got)
	}
	checkFsck(t, q)
}

// TestBatchPostDeadLetterReplay: a record the downstream refuses for good
// is a dead letter with reason handler, its one-record file in error/;
// once the downstream is fixed, spool replay brings it back and it is
// posted and processed.
func TestBatchPostDeadLetterReplay(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv"}`)
	srv := newCallServer(t, 0)
	var fixed atomic.Bool
	srv.answer = func(key string, nth int) (int, string) {
		if key == "m7" && !fixed.Load() {
			return http.StatusUnprocessableEntity, ""
		}
		return 0, ""
	}
	data, _ := ordersCSV(12, func(int) bool { return false })
	putBytes(t, q, "orders.csv", data)
	r := mustRun(t, 0, "consume", q, "--post", srv.URL)
	if st := parseStats(t, r); st != (consumeStats{Processed: 11, DeadLetters: 1}) {
		t.Fatalf("%+v, want 11 processed and m7 dead-lettered\n%s", st, r)
	}
	if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"orders~L8.csv"}) {
		t.Fatalf("error/ holds %q, want orders~L8.csv", got)
	}
	b, err := os.ReadFile(filepath.Join(q, errorStage, "orders~L8.csv"))
	if err != nil || string(b) != "msg_id,order_no,seq,amount\nm7,o7,7,7.07\n" {
		t.Fatalf("the dead letter holds %q (%v), want the header and m7's row", b, err)
	}
	db := filepath.Join(q, "ledger.db")
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter' AND reason = 'handler' AND file = 'orders~L8.csv'`); n != 1 {
		t.Fatal("m7's dead letter is not recorded with reason handler under its file")
	}
	checkFsck(t, q)
	fixed.Store(true)
	mustRun(t, 0, "replay", q, "orders~L8.csv")
	r = mustRun(t, 0, "consume", q, "--post", srv.URL)
	if st := parseStats(t, r); st != (consumeStats{Processed: 1}) {
		t.Fatalf("after the replay: %+v, want m7 processed\n%s", st, r)
	}
	if seen, _ := srv.seen(t); seen["m7"] != 2 {
		t.Fatalf("m7 posted %d times, want twice (refused, then replayed)", seen["m7"])
	}
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM processed WHERE msg_id = 'm7'`); n != 1 {
		t.Fatal("m7 is not processed after its replay")
	}
	checkFsck(t, q)
}

// TestBatchExec: a JSON Lines file's records run --exec, each with its
// record on stdin; a record the command fails is a dead letter.
func TestBatchExec(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "jsonl"}`)
	out := filepath.Join(t.TempDir(), "seen")
	var b bytes.Buffer
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, `{"msg_id":"j%d","order_no":"o","seq":%d,"amount":"1.00"}`+"\n", i, i)
	}
	putBytes(t, q, "feed.jsonl", b.Bytes())
	// One line per call, appended whole (O_APPEND, under PIPE_BUF).
	cmd := `[ "$SPOOL_MSG_ID" = j9 ] && exit 3; line=$(cat); echo "$SPOOL_MSG_ID $line" >> ` + out
	r := mustRun(t, 0, "consume", q, "--exec", cmd, "--concurrency", "4", "--retry-max", "1")
	if st := parseStats(t, r); st != (consumeStats{Processed: 29, DeadLetters: 1}) {
		t.Fatalf("%+v, want 29 processed and j9 dead-lettered\n%s", st, r)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lines) != 29 {
		t.Fatalf("%d calls recorded, want 29:\n%s", len(lines), got)
	}
	ids := map[string]bool{}
	for _, l := range lines {
		id, rec, _ := strings.Cut(l, " ")
		if ids[id] || !strings.Contains(rec, `"msg_id":"`+id+`"`) {
			t.Fatalf("call %q: twice, or not its record on stdin", l)
		}
		ids[id] = true
	}
	if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"feed~L9.jsonl"}) {
		t.Fatalf("error/ holds %q, want feed~L9.jsonl", got)
	}
	checkFsck(t, q)
}

// TestBatchPostCrash: a CSV file consumed with --post and killed several
// times in the middle: every good record ends processed once in the
// ledger, under its own claim, never a duplicate of itself; every one was
// posted at least once (again only when a kill found it reserved and not
// settled, at most --concurrency a kill); each bad row has one dead
// letter; fsck is clean.
func TestBatchPostCrash(t *testing.T) {
	t.Parallel()
	batchPostCrash(t, sqliteEngine, false, false)
}

// TestBatchPostCrashOrdered is TestBatchPostCrashRetries with --ordered:
// across the kills and the retries the server sees the calls of each
// order key one at a time and its seqs never going backwards, so a
// resumed run calls each key's first record not settled before its
// later ones (a call cut off by a kill is made again, first).
func TestBatchPostCrashOrdered(t *testing.T) {
	t.Parallel()
	batchPostCrash(t, sqliteEngine, true, true)
}

// TestBatchPostCrashRetries is TestBatchPostCrash with every 50th record
// refused once (503): kills land while records wait for their retries,
// which the resumed runs make, each record still recorded once.
func TestBatchPostCrashRetries(t *testing.T) {
	t.Parallel()
	batchPostCrash(t, sqliteEngine, true, false)
}

// TestBatchPostCrashEngines is TestBatchPostCrash on a PostgreSQL and a
// MariaDB ledger (SPOOL_TEST_POSTGRES, SPOOL_TEST_MYSQL; skipped without
// them, required on CI), whose reserves and settles run side by side.
func TestBatchPostCrashEngines(t *testing.T) {
	t.Parallel()
	for _, b := range []ledgerBackend{postgresEngine, mysqlEngine} {
		t.Run(b.name, func(t *testing.T) { batchPostCrash(t, b, false, false) })
	}
}

// batchPostCrash is the kill storm of TestBatchPostCrash on backend's
// ledger; with flaky, the first call of every 50th record is refused
// with a 503, to be retried; with ordered, the runs are --ordered, and
// the server's calls of each order key are checked (requireKeyOrder).
func batchPostCrash(t *testing.T, backend ledgerBackend, flaky, ordered bool) {
	rng := newRand(t)
	q := batchQueue(t, `{"format": "csv"}`)
	l := backend.open(t, q)
	srv := newCallServer(t, 2*time.Millisecond)
	refused := 0
	if flaky {
		srv.answer = func(key string, nth int) (int, string) {
			if n, _ := strconv.Atoi(strings.TrimPrefix(key, "m")); n%50 == 0 && nth == 0 {
				return http.StatusServiceUnavailable, ""
			}
			return 0, ""
		}
	}
	retry := []string{"--retry-base", "200ms", "--retry-jitter=false", "--retry-wait", "1m"}
	if ordered {
		retry = append(retry, "--ordered")
	}
	// Long (SPOOL_TEST_LONG=1): 20 000 records and 15 kills.
	records, minKills := testenv.Pick(20_000, 1500), testenv.Pick(15, 4)
	data, badLines := ordersCSV(records, func(i int) bool { return i%211 == 0 })
	good := records - len(badLines)
	putBytes(t, q, "orders.csv", data)
	kills, before := 0, 0
	for run := 0; kills < minKills && run < 10*minKills; run++ {
		p := start(t, slices.Concat([]string{"consume", q, "--post", srv.URL, "--concurrency", "8", "--post-timeout", "2s"}, retry, l.args)...)
		// Kill once the run has settled records of its own (after the
		// call bound of the killed run's reservations, 2s).
		exited := false
		if !poll(60*time.Second, time.Millisecond, func() bool {
			select {
			case <-p.done:
				exited = true
				return true
			default:
			}
			n, ok := ledgerProcessed(l)
			return ok && n > before
		}) {
			t.Fatalf("run %d settled nothing in 60s", run)
		}
		if exited || !p.killAfter(t, logDelay(rng, 100*time.Microsecond, 100*time.Millisecond)) {
			if r := p.result(); r.code != 0 {
				t.Fatalf("consumer exited by itself with a failure:\n%s", r)
			}
			break
		}
		kills++
		n, _ := ledgerProcessed(l)
		if n >= good {
			break
		}
		before = n
	}
	t.Logf("%d kills in the middle of the file", kills)
	ageTemps(t, q, 2*time.Minute)
	// The killed sessions' reservations are held until their calls
	// cannot be running: their lease lapses, and the call bound passes.
	// At the long size the last run may call most of 20 000 records, with
	// the race detector, beside the other long tests: more than the
	// two minutes a command gets (it took 2m0.4s once in CI).
	r := spoolAt{bin: spoolBin}.runWithin(t, testenv.Pick(6*time.Minute, cmdTimeout),
		slices.Concat([]string{"consume", q, "--post", srv.URL, "--concurrency", "8", "--post-timeout", "2s"}, retry, l.args)...)
	if r.code != 0 {
		t.Fatalf("the last run: want exit 0, got\n%s", r)
	}
	if st := parseStats(t, r); st.Duplicates != 0 {
		t.Fatalf("the last run: %+v, want no duplicate\n%s", st, r)
	}
	if n := l.count(t, `SELECT COUNT(*) FROM %[1]s`); n != good {
		t.Fatalf("%d processed rows, want %d", n, good)
	}
	if n := l.count(t, `SELECT COUNT(DISTINCT claim) FROM %[1]s`); n != good {
		t.Fatalf("%d record claims for %d records", n, good)
	}
	if n := l.count(t, `SELECT COUNT(*) FROM %[2]s WHERE outcome = 'duplicate'`); n != 0 {
		t.Fatalf("%d duplicate deliveries: a record was recorded twice", n)
	}
	if n := l.count(t, `SELECT COUNT(*) FROM %[2]s WHERE outcome = 'dead-letter'`); n != len(badLines) {
		t.Fatalf("%d dead-letter records, want %d", n, len(badLines))
	}
	if got := stageNames(t, q, errorStage); len(got) != len(badLines) {
		t.Fatalf("error/ holds %q, want %d files", got, len(badLines))
	}
	seen, _ := srv.seen(t)
	again := 0
	for i := 1; i <= records; i++ {
		n := seen["m"+strconv.Itoa(i)]
		switch {
		case i%211 == 0 && n != 0:
			t.Fatalf("bad row m%d posted", i)
		case i%211 != 0 && n < 1:
			t.Fatalf("m%d never posted", i)
		case n > 1:
			again += n - 1
		}
		if flaky && i%50 == 0 && i%211 != 0 {
			if n < 2 {
				t.Fatalf("m%d posted %d times, want its refused call and a retry", i, n)
			}
			refused++
			again--
		}
	}
	t.Logf("%d calls made again after the kills (and %d retries of refused calls)", again, refused)
	if ordered {
		keys := make([]string, 37) // ordersCSV's order_no: o0 to o36
		for k := range keys {
			keys[k] = "o" + strconv.Itoa(k)
		}
		requireKeyOrder(t, srv, keys, 1)
	}
	if again > 8*kills {
		t.Fatalf("%d calls made again after %d kills: a kill repeats at most --concurrency (8)", again, kills)
	}
	if got := stageNames(t, q, done); !slices.Equal(got, []string{"orders.csv"}) {
		t.Fatalf("done/ holds %q", got)
	}
	if got := stageNames(t, q, processing); len(got) != 0 {
		t.Fatalf("processing/ holds %q", got)
	}
	// Each record counted once, however the kills fell between its
	// settle and the progress passing it.
	wantFiles := []batchFileCounts{{"orders.csv", good, 0, len(badLines)}}
	if got := statusBatchFiles(t, spoolAt{bin: spoolBin}, q, l.args...); !slices.Equal(got, wantFiles) {
		t.Fatalf("spool status shows batch files %+v, want %+v", got, wantFiles)
	}
	checkFsck(t, q, l.args...)
}

// TestBatchPostGracefulStop: SIGTERM in the middle of a file consumed
// with --post: the calls in flight finish and are settled, the records
// reserved and not called are released, and the file goes back to inbox/
// at its progress; the next run posts the rest with no reservation of
// the stopped run in its way, each record once in all.
func TestBatchPostGracefulStop(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv"}`)
	l := sqliteCallLedger(t, q)
	srv := newCallServer(t, 2*time.Millisecond)
	const records = 3000
	data, _ := ordersCSV(records, func(int) bool { return false })
	putBytes(t, q, "orders.csv", data)
	r := stopOnceCommitted(t, start(t, "consume", q, "--post", srv.URL, "--concurrency", "8"), l, q)
	first := parseStats(t, r).Processed
	if first >= records {
		t.Skipf("all %d records were posted before the stop: too fast a machine", records)
	}
	if got := stageNames(t, q, inbox); !slices.Equal(got, []string{"orders.csv"}) {
		t.Fatalf("inbox/ holds %q, want the file given back", got)
	}
	if n := queryLedger(t, filepath.Join(q, "ledger.db"), `SELECT COUNT(*) FROM reservations`); n != 0 {
		t.Fatalf("%d reservations left by the stopped run", n)
	}
	r = mustRun(t, 0, "consume", q, "--post", srv.URL, "--concurrency", "8")
	second := parseStats(t, r)
	if first+second.Processed != records || second.Duplicates != 0 {
		t.Fatalf("%d then %+v: want %d records processed once", first, second, records)
	}
	if strings.Contains(r.stderr, "reservations") || strings.Contains(r.stderr, "holding the msg_ids") {
		t.Fatalf("the second run found reservations of the stopped one:\n%s", r)
	}
	seen, _ := srv.seen(t)
	for i := 1; i <= records; i++ {
		if n := seen["m"+strconv.Itoa(i)]; n != 1 {
			t.Fatalf("m%d posted %d times, want once", i, n)
		}
	}
	if got := stageNames(t, q, done); !slices.Equal(got, []string{"orders.csv"}) {
		t.Fatalf("done/ holds %q", got)
	}
	checkFsck(t, q)
}
