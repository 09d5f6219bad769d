//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Handlers end to end: consume --exec, --sql, --post and --on-dead-letter
// driven through the binary against real processes, a real local HTTP
// server and the real ledger file.

// TestExecTransientRetried: a command that exits 75 three times is retried
// after 100, 200 and 400 ms (no jitter), then succeeds; its processed row
// and its business effect (a marker line) happen exactly once. The message
// is alone in the queue so that its retries come when due: a retry that
// falls due while the consumer works through other messages waits for the
// end of that pass (TestBackoffDoesNotDelayOthers covers the others).
func TestExecTransientRetried(t *testing.T) {
	t.Parallel()
	needNanoDate(t)
	q, state := workQueue(t)
	script := writeFile(t, state, "flaky.sh", `#!/bin/sh
# $1: the state directory. FLAKY fails with EX_TEMPFAIL on its first three
# attempts; a message that succeeds appends its msg_id to the marker file.
date +%s%N >> "$1/attempts.$SPOOL_MSG_ID"
n=$(wc -l < "$1/attempts.$SPOOL_MSG_ID")
if [ "$SPOOL_MSG_ID" = FLAKY ] && [ "$n" -le 3 ]; then
  echo "attempt $n: backend unavailable" >&2
  exit 75
fi
echo "$SPOOL_MSG_ID" >> "$1/marker"
`)
	putMessage(t, q, "flaky.json", orderMessage("FLAKY", "O1", 1, "10.00"))
	db := openLedger(t, q)
	stop := watchAttempts(t, db, "FLAKY")
	r := mustRun(t, 0, "consume", q, "--exec", "sh "+shellQuote(script)+" "+shellQuote(state),
		"--retry-base", "100ms", "--retry-cap", "10s", "--retry-max", "5", "--retry-jitter=false", "--retry-wait", "1m")
	states := stop()
	if st := parseStats(t, r); st.Processed != 1 || st.DeadLetters != 0 || st.Duplicates != 0 {
		t.Fatalf("stats %+v, want 1 processed\n%s", st, r)
	}

	// The script stamps each attempt as it starts; the ledger says when
	// each failed attempt began and when the next was due.
	ts := stamps(t, filepath.Join(state, "attempts.FLAKY"))
	if len(ts) != 4 || len(states) != 3 {
		t.Fatalf("FLAKY was attempted %d times, with %d retry states seen in the ledger (%+v); want 4 and 3", len(ts), len(states), states)
	}
	for i, s := range states {
		delay := 100 * time.Millisecond << i // the policy's delay after attempt i+1: growing
		if s.Attempts != i+1 || s.NextAt.Sub(s.LastFailure) != delay {
			t.Errorf("after attempt %d the ledger holds %+v, want attempt %d due %v after its failure", i+1, s, i+1, delay)
		}
		if wait := ts[i+1].Sub(s.LastFailure); wait < delay || wait > delay+2*time.Second {
			t.Errorf("attempt %d came %v after attempt %d failed, want its delay %v (and not much more)", i+2, wait, i+1, delay)
		}
		// The same gap as the ledger saw it: transaction start to start.
		if i > 0 {
			if gap := s.LastFailure.Sub(states[i-1].LastFailure); gap < delay/2 {
				t.Errorf("attempts %d and %d began %v apart in the ledger, want at least %v", i, i+1, gap, delay/2)
			}
		}
	}
	// The delays the ledger scheduled grow exactly as the policy says
	// (checked above: 100, 200, 400 ms). The gaps between the script's
	// stamps only approximate them: under load, starting the command can
	// take longer for one attempt than for the next.
	t.Logf("gaps between FLAKY's attempts as the script stamped them: %v", gaps(ts))

	if marks := readLines(t, filepath.Join(state, "marker")); len(marks) != 1 || marks[0] != "FLAKY" {
		t.Errorf("business effects %q, want FLAKY's once", marks)
	}
	rows := processedRows(t, db)
	if len(rows) != 1 || rows["FLAKY"].File != "flaky.json" {
		t.Errorf("processed holds %v, want FLAKY's row", rows)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM claims`); n != 1 {
		t.Errorf("the ledger records %d claims, want 1 (a retry is not a delivery)", n)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM attempts`); n != 0 {
		t.Errorf("attempts keeps %d rows after success, want none", n)
	}
	if countNames(t, q, done) != 1 || countNames(t, q, errorStage) != 0 {
		t.Errorf("done/ %d, error/ %d; want 1 and 0", countNames(t, q, done), countNames(t, q, errorStage))
	}
	requireEmpty(t, q, processing)
}

// TestExecPermanentDeadLettered: exit 3 is a dead letter at once, reason
// handler, with the command's stderr (not its stdout) as the detail; the
// command sees the message on stdin and its fields in the environment.
func TestExecPermanentDeadLettered(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	script := writeFile(t, state, "book.sh", `#!/bin/sh
echo x >> "$1/calls.$SPOOL_MSG_ID"
printf '%s|%s|%s|%s|%s|%s\n' "$SPOOL_MSG_ID" "$SPOOL_ORDER_NO" "$SPOOL_SEQ" "$SPOOL_AMOUNT" "$SPOOL_FILE" "$SPOOL_QUEUE" > "$1/env.$SPOOL_MSG_ID"
cat > "$1/stdin.$SPOOL_MSG_ID"
if [ "$SPOOL_MSG_ID" = BAD ]; then
  echo "this is stdout, not the detail"
  echo "order $SPOOL_ORDER_NO is closed: cannot book $SPOOL_AMOUNT" >&2
  exit 3
fi
`)
	good := `{"msg_id":"GOOD","order_no":"O-1","seq":1,"amount":0.10,"note":"héllo"}`
	putMessage(t, q, "good.json", good)
	putMessage(t, q, "bad.json", orderMessage("BAD", "O-9", 2, "12.50"))
	// A long --retry-base: were exit 3 taken as transient, the drain would
	// wait an hour for the retry instead of finishing.
	r := runWithin(t, time.Minute, "consume", q, "--exec", "sh "+shellQuote(script)+" "+shellQuote(state), "--retry-base", "1h", "--retry-cap", "1h")
	if r.code != 0 {
		t.Fatalf("want exit 0\n%s", r)
	}
	if st := parseStats(t, r); st.Processed != 1 || st.DeadLetters != 1 {
		t.Fatalf("stats %+v, want 1 processed and 1 dead letter\n%s", st, r)
	}
	if n := len(readLines(t, filepath.Join(state, "calls.BAD"))); n != 1 {
		t.Errorf("BAD was attempted %d times, want once", n)
	}
	if got := errorsCSV(t, q); len(got) != 1 || got["bad.json"] != "handler" {
		t.Errorf("spool errors: %v, want bad.json,handler", got)
	}
	db := openLedger(t, q)
	dl := deadLetterOf(t, db, "bad.json")
	if want := "exec: exit status 3: order O-9 is closed: cannot book 12.50"; dl.Reason != "handler" || dl.Detail != want || dl.Attempts != 1 {
		t.Errorf("dead letter %+v, want reason handler, detail %q, 1 attempt", dl, want)
	}
	if _, ok := processedRows(t, db)["BAD"]; ok {
		t.Error("BAD has a processed row; a permanent failure must roll it back")
	}
	if _, ok := attemptsOf(t, db, "BAD"); ok {
		t.Error("BAD is scheduled for a retry")
	}

	env, err := os.ReadFile(filepath.Join(state, "env.GOOD"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "GOOD|O-1|1|0.10|good.json|" + q + "\n"; string(env) != want {
		t.Errorf("environment of the command: %q, want %q", env, want)
	}
	stdin, err := os.ReadFile(filepath.Join(state, "stdin.GOOD"))
	if err != nil || string(stdin) != good {
		t.Errorf("stdin of the command: %q (%v), want the message's bytes %q", stdin, err, good)
	}
}

// TestExecRetriesExhausted: a command that always exits 75 is tried
// --retry-max times, then dead-lettered as retries-exhausted with the last
// attempt's error.
func TestExecRetriesExhausted(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	script := writeFile(t, state, "locked.sh", `#!/bin/sh
echo x >> "$1/calls"
echo "attempt $(wc -l < "$1/calls"): still locked" >&2
exit 75
`)
	putMessage(t, q, "m.json", orderMessage("M", "O", 1, "5"))
	r := mustRun(t, 0, "consume", q, "--exec", "sh "+shellQuote(script)+" "+shellQuote(state),
		"--retry-base", "20ms", "--retry-max", "3", "--retry-jitter=false", "--retry-wait", "1m")
	if st := parseStats(t, r); st.DeadLetters != 1 || st.Processed != 0 {
		t.Fatalf("stats %+v, want 1 dead letter\n%s", st, r)
	}
	if n := len(readLines(t, filepath.Join(state, "calls"))); n != 3 {
		t.Errorf("attempted %d times, want --retry-max 3", n)
	}
	if got := errorsCSV(t, q); got["m.json"] != "retries-exhausted" {
		t.Errorf("spool errors: %v, want m.json,retries-exhausted", got)
	}
	db := openLedger(t, q)
	dl := deadLetterOf(t, db, "m.json")
	if want := "exec: exit status 75 (temporary failure): attempt 3: still locked"; dl.Reason != "retries-exhausted" || dl.Detail != want || dl.Attempts != 3 {
		t.Errorf("dead letter %+v, want retries-exhausted, the last error %q, 3 attempts", dl, want)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM attempts`); n != 0 {
		t.Errorf("attempts keeps %d rows for a dead letter", n)
	}
	requireEmpty(t, q, processing)
}

// TestExecTimeoutKillsAndRetries: a command that outlives --exec-timeout is
// killed with the children it started, and the attempt counts as a
// transient failure.
func TestExecTimeoutKillsAndRetries(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	pidFile := filepath.Join(state, "child.pid")
	putMessage(t, q, "m.json", orderMessage("M", "O", 1, "5"))
	begin := time.Now()
	r := mustRun(t, 0, "consume", q, "--exec", "sleep 60 & echo $! >> "+shellQuote(pidFile)+"; wait",
		"--exec-timeout", "300ms", "--retry-base", "10ms", "--retry-max", "2", "--retry-wait", "1m")
	if took := time.Since(begin); took > 20*time.Second {
		t.Errorf("two attempts of 300ms took %v", took)
	}
	db := openLedger(t, q)
	dl := deadLetterOf(t, db, "m.json")
	if dl.Reason != "retries-exhausted" || dl.Attempts != 2 || !strings.Contains(dl.Detail, "timed out after 300ms") {
		t.Errorf("dead letter %+v, want retries-exhausted after 2 timed-out attempts", dl)
	}
	pids := readLines(t, pidFile)
	if len(pids) != 2 {
		t.Fatalf("%d children started, want 2", len(pids))
	}
	for _, p := range pids {
		pid, err := strconv.Atoi(p)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the timed-out command's child to be gone", func() bool {
			return syscall.Kill(pid, 0) == syscall.ESRCH
		})
	}
	if st := parseStats(t, r); st.DeadLetters != 1 {
		t.Errorf("stats %+v, want 1 dead letter", st)
	}
}

// TestBackoffDoesNotDelayOthers: a message waiting an hour for its retry
// holds up none of the 100 behind it; on SIGTERM it goes back to inbox/
// and its attempt stays counted in the ledger.
func TestBackoffDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	q, _ := workQueue(t)
	// Named to be claimed first.
	putMessage(t, q, "000-slow.json", orderMessage("SLOW", "S", 1, "1"))
	produce(t, q, 0, 100)
	p := start(t, "consume", q, "--watch", "--exec", `test "$SPOOL_MSG_ID" != SLOW || { echo busy >&2; exit 75; }`,
		"--retry-base", "1h", "--retry-cap", "1h")
	waitFor(t, time.Minute, "the 100 others to reach done/", func() bool { return countNames(t, q, done) == 100 })
	// SLOW waits in processing/, claimed and held, not in the way.
	if n, in := countClaims(t, q), countNames(t, q, inbox); n != 1 || in != 0 {
		t.Errorf("while SLOW waits: %d claims, %d in inbox/; want its claim alone", n, in)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 0 {
		t.Fatalf("after SIGTERM: want exit 0\n%s", r)
	}
	if st := parseStats(t, r); st.Processed != 100 || st.DeadLetters != 0 {
		t.Errorf("stats %+v, want 100 processed", st)
	}
	requireEmpty(t, q, processing)
	if got := names(t, q, inbox); len(got) != 1 || got[0] != "000-slow.json" {
		t.Errorf("inbox/ holds %q, want SLOW back", got)
	}
	db := openLedger(t, q)
	if n, ok := attemptsOf(t, db, "SLOW"); n != 1 || !ok {
		t.Errorf("the ledger counts %d attempts of SLOW (kept: %v), want 1", n, ok)
	}
	if _, ok := processedRows(t, db)["SLOW"]; ok {
		t.Error("SLOW has a processed row")
	}
}

// TestRestartDuringBackoff: killed with SIGKILL while a message waits for
// its retry, a new run neither tries it before it is due nor starts its
// count again: with --retry-max 2 the restarted run's first attempt is the
// second and last.
func TestRestartDuringBackoff(t *testing.T) {
	t.Parallel()
	needNanoDate(t)
	q, state := workQueue(t)
	stampFile := filepath.Join(state, "attempts")
	cmd := "date +%s%N >> " + shellQuote(stampFile) + "; echo 'still down' >&2; exit 75"
	args := []string{"consume", q, "--exec", cmd, "--retry-base", "1s", "--retry-cap", "1s", "--retry-max", "2", "--retry-jitter=false", "--retry-wait", "1m"}
	putMessage(t, q, "r.json", orderMessage("R", "O", 1, "7"))

	p := start(t, args...)
	db := openLedger(t, q)
	stop := watchAttempts(t, db, "R")
	waitFor(t, time.Minute, "the first attempt to be recorded", func() bool {
		n, ok := attemptsOf(t, db, "R")
		return ok && n == 1
	})
	if !p.killAfter(t, 0) {
		t.Fatalf("the consumer exited before its retry was due\n%s", p.result())
	}
	if n := countClaims(t, q); n != 1 {
		t.Fatalf("processing/ holds %d claims after the kill, want the waiting one", n)
	}

	r := mustRun(t, 0, args...)
	states := stop()
	if st := parseStats(t, r); st.DeadLetters != 1 || st.Recovered != 1 {
		t.Errorf("stats %+v, want the dead consumer's claim recovered, then a dead letter", st)
	}
	ts := stamps(t, stampFile)
	if len(ts) != 2 {
		t.Fatalf("%d attempts in all, want 2: the count must survive the restart", len(ts))
	}
	if len(states) != 1 || states[0].Attempts != 1 || states[0].NextAt.Sub(states[0].LastFailure) != time.Second {
		t.Fatalf("retry states in the ledger: %+v, want one: attempt 1, due 1s after it failed", states)
	}
	if wait := ts[1].Sub(states[0].LastFailure); wait < time.Second {
		t.Errorf("the restarted run tried R %v after its first attempt failed, before its 1s delay", wait)
	}
	dl := deadLetterOf(t, db, "r.json")
	if dl.Reason != "retries-exhausted" || dl.Attempts != 2 || !strings.Contains(dl.Detail, "still down") {
		t.Errorf("dead letter %+v, want retries-exhausted after 2 attempts", dl)
	}
	requireEmpty(t, q, processing)
}

// TestSQLHandlerFailureRollsBack: when a --sql statement fails (a CHECK
// constraint of a business table), the statements before it and the
// processed row roll back with it, and the message is a dead letter.
func TestSQLHandlerFailureRollsBack(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	prepareLedger(t, q,
		`CREATE TABLE audit (msg_id TEXT PRIMARY KEY, order_no TEXT NOT NULL)`,
		`CREATE TABLE balances (order_no TEXT PRIMARY KEY, cents INTEGER NOT NULL CHECK (cents >= 0))`)
	sqlFile := writeFile(t, state, "book.sql", `-- Every message is audited, then booked; a balance never goes negative.
INSERT INTO audit (msg_id, order_no) VALUES (:msg_id, :order_no);
INSERT INTO balances (order_no, cents) VALUES (:order_no, CAST(round(:amount * 100) AS INTEGER))
    ON CONFLICT (order_no) DO UPDATE SET cents = cents + excluded.cents;
`)
	putMessage(t, q, "a.json", orderMessage("A", "O1", 1, "10.00"))
	putMessage(t, q, "b.json", orderMessage("B", "O1", 2, "5.00"))
	putMessage(t, q, "c.json", orderMessage("C", "O1", 3, "-20.00")) // O1 below zero, in any order
	putMessage(t, q, "d.json", orderMessage("D", "O2", 1, "-1.00"))  // a new order below zero
	r := mustRun(t, 0, "consume", q, "--sql", sqlFile)
	if st := parseStats(t, r); st.Processed != 2 || st.DeadLetters != 2 {
		t.Fatalf("stats %+v, want 2 processed, 2 dead letters\n%s", st, r)
	}
	if got := names(t, q, errorStage); len(got) != 2 || got[0] != "c.json" || got[1] != "d.json" {
		t.Errorf("error/ holds %q, want c.json and d.json", got)
	}
	db := openLedger(t, q)
	for _, f := range []string{"c.json", "d.json"} {
		if dl := deadLetterOf(t, db, f); dl.Reason != "handler" || !strings.Contains(dl.Detail, "statement 2 (line 3)") || !strings.Contains(dl.Detail, "CHECK constraint failed") {
			t.Errorf("dead letter of %s: %+v, want reason handler, the failing statement and the constraint", f, dl)
		}
	}
	rows := processedRows(t, db)
	if len(rows) != 2 || rows["A"].MsgID == "" || rows["B"].MsgID == "" {
		t.Errorf("processed holds %v, want A and B only: a failed handler rolls back its row", rows)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM audit WHERE msg_id IN ('A', 'B')`); n != 2 || count(t, db, `SELECT COUNT(*) FROM audit`) != 2 {
		t.Errorf("audit holds rows of failed messages: their first statement was not rolled back")
	}
	if got := count(t, db, `SELECT cents FROM balances WHERE order_no = 'O1'`); got != 1500 {
		t.Errorf("O1 balance %d cents, want 1500", got)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM balances WHERE order_no = 'O2'`); n != 0 {
		t.Error("O2 has a balance row from a failed message")
	}
}

// TestSQLHandlerUpsertOnce: a --sql upsert runs once per msg_id whatever the
// duplicates, within a run and across runs, with every parameter bound as
// documented.
func TestSQLHandlerUpsertOnce(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	prepareLedger(t, q,
		`CREATE TABLE orders (order_no TEXT PRIMARY KEY, messages INTEGER NOT NULL, last_seq INTEGER NOT NULL)`,
		`CREATE TABLE order_lines (msg_id TEXT PRIMARY KEY, order_no TEXT NOT NULL, seq INTEGER NOT NULL,
			amount TEXT NOT NULL, customer TEXT, items TEXT, note TEXT, file TEXT NOT NULL, payload TEXT NOT NULL)`)
	sqlFile := writeFile(t, state, "orders.sql", `-- One line per message: its PRIMARY KEY would refuse a second run.
INSERT INTO order_lines (msg_id, order_no, seq, amount, customer, items, note, file, payload)
VALUES (:msg_id, :order_no, :seq, :amount, :customer, :items, :note, :file, :payload);
/* The order's running state; a ';' here is no statement's end. */
INSERT INTO orders (order_no, messages, last_seq) VALUES (:order_no, 1, :seq)
ON CONFLICT (order_no) DO UPDATE SET messages = messages + 1, last_seq = max(last_seq, excluded.last_seq);
`)
	a1 := `{"msg_id":"A1","order_no":"A","seq":1,"amount":"12.50","customer":"Zo\u00eb \"Z\"","items":[1,{"sku":"x"}]}`
	msgs := map[string]string{
		"a1.json":        a1,
		"a1-resend.json": a1,
		"a2.json":        `{"msg_id":"A2","order_no":"A","seq":2,"amount":0.10,"note":null}`,
		"a3.json":        `{"msg_id":"A3","order_no":"A","seq":3,"amount":"-3.00","note":"gift"}`,
		"b1.json":        `{"msg_id":"B1","order_no":"B","seq":1,"amount":"1e3"}`,
		"b1-resend.json": `{"msg_id":"B1","order_no":"B","seq":1,"amount":"1e3"}`,
	}
	for name, body := range msgs {
		putMessage(t, q, name, body)
	}
	r := mustRun(t, 0, "consume", q, "--sql", sqlFile)
	if st := parseStats(t, r); st.Processed != 4 || st.Duplicates != 2 || st.DeadLetters != 0 {
		t.Fatalf("first run: %+v, want 4 processed, 2 duplicates\n%s", st, r)
	}
	// A redelivery of A2 and a new message, in a second run.
	src := t.TempDir()
	writeFile(t, src, "a2.json", msgs["a2.json"])
	writeFile(t, src, "b2.json", `{"msg_id":"B2","order_no":"B","seq":2,"amount":"2"}`)
	mustRun(t, 0, "enqueue", q, filepath.Join(src, "a2.json"), filepath.Join(src, "b2.json"))
	r = mustRun(t, 0, "consume", q, "--sql", sqlFile)
	if st := parseStats(t, r); st.Processed != 1 || st.Duplicates != 1 || st.DeadLetters != 0 {
		t.Fatalf("second run: %+v, want 1 processed, 1 duplicate\n%s", st, r)
	}

	db := openLedger(t, q)
	for _, want := range []struct {
		order          string
		messages, last int
	}{{"A", 3, 3}, {"B", 2, 2}} {
		var messages, last int
		if err := db.QueryRow(`SELECT messages, last_seq FROM orders WHERE order_no = ?`, want.order).Scan(&messages, &last); err != nil {
			t.Fatalf("order %s: %v", want.order, err)
		}
		if messages != want.messages || last != want.last {
			t.Errorf("order %s: %d messages, last seq %d; want %d and %d", want.order, messages, last, want.messages, want.last)
		}
	}
	type line struct{ order, amount, customer, items, note, file, payload string }
	got := map[string]line{}
	rows, err := db.Query(`SELECT msg_id, order_no, amount, COALESCE(customer, '<null>'), COALESCE(items, '<null>'),
		COALESCE(note, '<null>'), file, payload FROM order_lines WHERE typeof(seq) = 'integer'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var l line
		if err := rows.Scan(&id, &l.order, &l.amount, &l.customer, &l.items, &l.note, &l.file, &l.payload); err != nil {
			t.Fatal(err)
		}
		got[id] = l
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("order_lines holds %d rows with an integer seq, want 5: %v", len(got), got)
	}
	if l := got["A1"]; l.amount != "12.50" || l.customer != `Zoë "Z"` || l.items != `[1,{"sku":"x"}]` || l.note != "<null>" ||
		(l.file != "a1.json" && l.file != "a1-resend.json") || l.payload != a1 {
		t.Errorf("A1's line: %+v", l)
	}
	if l := got["A2"]; l.amount != "0.10" || l.note != "<null>" || l.file != "a2.json" || l.customer != "<null>" {
		t.Errorf("A2's line (JSON null and absent fields are NULL): %+v", l)
	}
	if l := got["A3"]; l.amount != "-3.00" || l.note != "gift" {
		t.Errorf("A3's line: %+v", l)
	}
	if l := got["B1"]; l.amount != "1e3" {
		t.Errorf("B1's amount %q, want exactly 1e3", l.amount)
	}
	if n := len(processedRows(t, db)); n != 5 {
		t.Errorf("processed holds %d rows, want 5", n)
	}
}

// postHit is one request the test's HTTP server received.
type postHit struct {
	at          time.Time
	key, ctype  string
	body        []byte
	bodyMessage string // the msg_id in the body
}

// TestPostHandler: --post against a local server: a 503 with Retry-After
// is retried no sooner than asked, then processed; a 429 is retried; a 400
// is a dead letter at once with the status and the body in its detail;
// every request carries the message and its msg_id as Idempotency-Key.
func TestPostHandler(t *testing.T) {
	t.Parallel()
	q, _ := workQueue(t)
	var mu sync.Mutex
	var hits []postHit
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			MsgID string `json:"msg_id"`
		}
		_ = json.Unmarshal(body, &m)
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		hits = append(hits, postHit{at: time.Now(), key: key, ctype: r.Header.Get("Content-Type"), body: body, bodyMessage: m.MsgID})
		n := 0
		for _, h := range hits {
			if h.key == key {
				n++
			}
		}
		mu.Unlock()
		switch {
		case key == "RETRY" && n == 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, "down for maintenance")
			return
		case key == "LIMIT" && n == 1:
			w.WriteHeader(http.StatusTooManyRequests)
			return
		case key == "BAD":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"amount must be positive"}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(srv.Close)

	bodies := map[string]string{
		"retry.json": orderMessage("RETRY", "O", 1, "1.00"),
		"limit.json": orderMessage("LIMIT", "O", 2, "2.00"),
		"bad.json":   orderMessage("BAD", "O", 3, "-3.00"),
		"ok.json":    orderMessage("OK", "O", 4, "4.00"),
	}
	for name, body := range bodies {
		putMessage(t, q, name, body)
	}
	r := mustRun(t, 0, "consume", q, "--post", srv.URL+"/orders", "--retry-base", "20ms", "--retry-max", "4", "--retry-jitter=false", "--retry-wait", "1m")
	if st := parseStats(t, r); st.Processed != 3 || st.DeadLetters != 1 {
		t.Fatalf("stats %+v, want 3 processed, 1 dead letter\n%s", st, r)
	}

	mu.Lock()
	defer mu.Unlock()
	byKey := map[string][]postHit{}
	for _, h := range hits {
		byKey[h.key] = append(byKey[h.key], h)
		if h.key != h.bodyMessage || h.ctype != "application/json" {
			t.Errorf("request with Idempotency-Key %q for msg_id %q, Content-Type %q", h.key, h.bodyMessage, h.ctype)
		}
		if string(h.body) != bodies[strings.ToLower(h.key)+".json"] {
			t.Errorf("request %s: body %q, want the message's bytes", h.key, h.body)
		}
	}
	for key, want := range map[string]int{"RETRY": 2, "LIMIT": 2, "BAD": 1, "OK": 1} {
		if len(byKey[key]) != want {
			t.Errorf("%s: %d requests, want %d", key, len(byKey[key]), want)
		}
	}
	if h := byKey["RETRY"]; len(h) == 2 {
		// Measured from the server's side of the first attempt, a few
		// milliseconds after the ledger started counting the delay.
		if g := h[1].at.Sub(h[0].at); g < time.Second-50*time.Millisecond {
			t.Errorf("RETRY was retried %v after a 503 with Retry-After: 1", g)
		}
	}
	if got := names(t, q, errorStage); len(got) != 1 || got[0] != "bad.json" {
		t.Errorf("error/ holds %q, want bad.json", got)
	}
	db := openLedger(t, q)
	if dl := deadLetterOf(t, db, "bad.json"); dl.Reason != "handler" || dl.Attempts != 1 || dl.Detail != `post: 400 Bad Request: {"error":"amount must be positive"}` {
		t.Errorf("dead letter %+v, want reason handler after 1 attempt, the status and the body", dl)
	}
	if rows := processedRows(t, db); len(rows) != 3 {
		t.Errorf("processed holds %d rows, want 3", len(rows))
	}
}

// TestOnDeadLetterNotifies: --on-dead-letter runs once per message that
// lands in error/, with the name it got there, its reason and detail;
// consume waits for the notifications before it exits.
func TestOnDeadLetterNotifies(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	notes := filepath.Join(state, "notes")
	// Dropped there by hand: the next garbage.json is stored as garbage~2.json.
	writeFile(t, filepath.Join(q, errorStage), "garbage.json", "old")
	putMessage(t, q, "garbage.json", "not json")
	putMessage(t, q, "nofield.json", `{"msg_id":"N"}`)
	putMessage(t, q, "reject.json", orderMessage("REJECT", "O", 1, "1"))
	for i := range 3 {
		putMessage(t, q, fmt.Sprintf("ok%d.json", i), orderMessage(fmt.Sprint("OK", i), "O", i+2, "1"))
	}
	// --log-level warn: the dead-letter records of the default level are
	// TestLogLevels' business; here stderr holds the notifier's lines only.
	r := mustRun(t, 0, "consume", q, "--log-level", "warn",
		"--exec", `test "$SPOOL_MSG_ID" != REJECT || { echo "no such customer" >&2; exit 3; }`,
		"--on-dead-letter", `printf '%s|%s|%s|%s\n' "$SPOOL_FILE" "$SPOOL_REASON" "$SPOOL_DETAIL" "$SPOOL_QUEUE" >> `+shellQuote(notes))
	if st := parseStats(t, r); st.Processed != 3 || st.DeadLetters != 3 {
		t.Fatalf("stats %+v, want 3 processed, 3 dead letters\n%s", st, r)
	}
	if r.stderr != "" {
		t.Errorf("stderr %q, want nothing", r.stderr)
	}
	got := map[string]string{}
	for _, l := range readLines(t, notes) {
		f := strings.Split(l, "|")
		if len(f) != 4 || f[3] != q {
			t.Fatalf("notification %q: want FILE|REASON|DETAIL|%s", l, q)
		}
		got[f[0]] = f[1]
		if f[0] == "reject.json" && f[2] != "exec: exit status 3: no such customer" {
			t.Errorf("SPOOL_DETAIL of reject.json: %q", f[2])
		}
		if _, err := os.Stat(filepath.Join(q, errorStage, f[0])); err != nil {
			t.Errorf("notified %s, not in error/: %v", f[0], err)
		}
	}
	want := map[string]string{"garbage~2.json": "parse", "nofield.json": "missing-field", "reject.json": "handler"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("notifications %v, want %v", got, want)
	}
}

// TestOnDeadLetterSlowDoesNotBlock: notifications that do not finish
// (until the test lets them) and then fail do not hold up consumption;
// their failures are one line each on stderr, and a watcher told to stop
// waits for them.
//
// The notifications wait for a gate file, not for a time: with a fixed
// sleep, a loaded machine could take longer to consume the 50 messages
// than the notifications to run, and the test would blame the consumer.
func TestOnDeadLetterSlowDoesNotBlock(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	log := filepath.Join(state, "log")
	gate := filepath.Join(state, "gate")
	for i := range 4 {
		putMessage(t, q, fmt.Sprintf("bad%d.json", i), "{")
	}
	produce(t, q, 0, 50)
	// STOPPING=1 on the notify socket says the watcher took the SIGTERM.
	addr, notified := notifySocket(t, false)
	// A timeout far above the test's waits: the notifications end when the
	// gate opens, not when they are killed.
	p := spoolAt{bin: spoolBin, env: []string{"NOTIFY_SOCKET=" + addr}}.start(t,
		"consume", q, "--watch", "--log-level", "warn", "--on-dead-letter-timeout", "5m", "--on-dead-letter",
		"echo start >> "+shellQuote(log)+"; while [ ! -e "+shellQuote(gate)+" ]; do sleep 0.02; done; echo end >> "+shellQuote(log)+"; echo 'pager unreachable' >&2; exit 1")
	// No notification can finish before the gate opens: consumption that
	// waited for them would never get there.
	waitFor(t, time.Minute, "all 54 messages to be consumed while the notifications wait", func() bool {
		return countNames(t, q, done) == 50 && countNames(t, q, errorStage) == 4
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	receive(t, notified, "STOPPING=1")
	// A watcher that did not wait for its notifications would exit now;
	// give it a moment to (a pause that can only let a bug pass, never fail
	// a correct watcher).
	select {
	case <-p.done:
		t.Fatalf("the watcher exited while its notifications ran\n%s", p.result())
	case <-time.After(300 * time.Millisecond):
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 0 {
		t.Fatalf("want exit 0\n%s", r)
	}
	if got := readLines(t, log); strings.Count(strings.Join(got, " "), "end") != 4 {
		t.Errorf("after exit the notifier log holds %q, want 4 finished: consume waits for running notifications", got)
	}
	warned := 0
	for _, l := range lines(r.stderr) {
		if strings.HasPrefix(l, "spool: consume: on-dead-letter bad") && strings.HasSuffix(l, ": exit status 1: pager unreachable") {
			warned++
		} else {
			t.Errorf("unexpected stderr line %q", l)
		}
	}
	if warned != 4 {
		t.Errorf("%d failure lines on stderr, want 4", warned)
	}
}

// TestOnDeadLetterHangingIsKilled: a notification that hangs is killed
// after --on-dead-letter-timeout, logged, and the drain exits 0.
func TestOnDeadLetterHangingIsKilled(t *testing.T) {
	t.Parallel()
	q, _ := workQueue(t)
	putMessage(t, q, "bad.json", "[]")
	putMessage(t, q, "ok.json", orderMessage("OK", "O", 1, "1"))
	begin := time.Now()
	r := mustRun(t, 0, "consume", q, "--log-level", "warn", "--on-dead-letter", "sleep 60", "--on-dead-letter-timeout", "300ms")
	if took := time.Since(begin); took > 15*time.Second {
		t.Errorf("consume took %v with a hanging notifier bounded to 300ms", took)
	}
	if st := parseStats(t, r); st.Processed != 1 || st.DeadLetters != 1 {
		t.Errorf("stats %+v", st)
	}
	if want := "spool: consume: on-dead-letter bad.json: timed out after 300ms, process group killed\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
}

// TestSQLHandlerPostgres: the same --sql file shape on a PostgreSQL ledger
// (a schema of its own): named parameters become $N, a constraint's
// failure rolls back the statements before it and the processed row.
// It needs SPOOL_TEST_POSTGRES (required on CI), like the backend's tests.
func TestSQLHandlerPostgres(t *testing.T) {
	t.Parallel()
	dsn, admin := postgresServer(t)
	schema := postgresSchema(t, admin,
		`CREATE TABLE %s.payments (msg_id TEXT PRIMARY KEY, order_no TEXT NOT NULL,
			amount NUMERIC NOT NULL CHECK (amount >= 0), customer TEXT)`,
		`CREATE TABLE %s.orders (order_no TEXT PRIMARY KEY, payments INTEGER NOT NULL, last_seq INTEGER NOT NULL)`)
	q, state := workQueue(t)
	sqlFile := writeFile(t, state, "orders.sql", `-- Portable: runs unchanged on SQLite.
INSERT INTO payments (msg_id, order_no, amount, customer)
VALUES (:msg_id, :order_no, :amount, :customer);
INSERT INTO orders (order_no, payments, last_seq) VALUES (:order_no, 1, :seq)
ON CONFLICT (order_no) DO UPDATE SET payments = orders.payments + 1,
    last_seq = CASE WHEN excluded.last_seq > orders.last_seq THEN excluded.last_seq ELSE orders.last_seq END;
`)
	a1 := `{"msg_id":"a1","order_no":"A","seq":1,"amount":"12.50","customer":"Zo\u00eb"}`
	putMessage(t, q, "a1.json", a1)
	putMessage(t, q, "a1-resend.json", a1)
	putMessage(t, q, "a2.json", `{"msg_id":"a2","order_no":"A","seq":2,"amount":0.10}`)
	putMessage(t, q, "a3.json", `{"msg_id":"a3","order_no":"A","seq":3,"amount":"-1.00"}`)
	r := mustRun(t, 0, "consume", q, "--db", withSearchPath(t, dsn, schema), "--sql", sqlFile)
	if st := parseStats(t, r); st.Processed != 2 || st.Duplicates != 1 || st.DeadLetters != 1 {
		t.Fatalf("stats %+v, want 2 processed, 1 duplicate, 1 dead letter\n%s", st, r)
	}
	var got []string
	rows, err := admin.Query(`SELECT msg_id, amount::text, COALESCE(customer, '<null>') FROM ` + schema + `.payments ORDER BY msg_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, amount, customer string
		if err := rows.Scan(&id, &amount, &customer); err != nil {
			t.Fatal(err)
		}
		got = append(got, id+" "+amount+" "+customer)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a1 12.50 Zoë", "a2 0.10 <null>"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("payments %q, want %q", got, want)
	}
	var payments, last, processed int
	if err := admin.QueryRow(`SELECT payments, last_seq FROM `+schema+`.orders WHERE order_no = 'A'`).Scan(&payments, &last); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRow(`SELECT COUNT(*) FROM ` + schema + `.processed`).Scan(&processed); err != nil {
		t.Fatal(err)
	}
	if payments != 2 || last != 2 || processed != 2 {
		t.Errorf("order A: %d payments, last seq %d; processed rows %d; want 2, 2, 2", payments, last, processed)
	}
	var reason, detail string
	if err := admin.QueryRow(`SELECT reason, detail FROM `+schema+`.deliveries WHERE outcome = 'dead-letter' AND file = 'a3.json'`).Scan(&reason, &detail); err != nil {
		t.Fatal(err)
	}
	if reason != "handler" || !strings.Contains(detail, "violates check constraint") {
		t.Errorf("dead letter of a3.json: %s %q", reason, detail)
	}
}

// TestSQLTimeoutPostgres: on a PostgreSQL ledger a --sql statement still
// running at --sql-timeout is cancelled by the server; the message is a
// transient failure (its savepoint rolled back, retried until
// retries-exhausted here), and the rest of its batch commits. On SQLite
// the flag is refused, as is a timeout at or above the claim lease.
func TestSQLTimeoutPostgres(t *testing.T) {
	t.Parallel()
	dsn, admin := postgresServer(t)
	schema := postgresSchema(t, admin, `CREATE TABLE %s.seen (msg_id TEXT PRIMARY KEY)`)
	q, state := workQueue(t)
	sqlFile := writeFile(t, state, "slow.sql", `INSERT INTO seen (msg_id) VALUES (:msg_id);
SELECT pg_sleep(CASE WHEN :msg_id = 'slow' THEN 5 ELSE 0 END);
`)
	putMessage(t, q, "a.json", orderMessage("a", "A", 1, "1"))
	putMessage(t, q, "slow.json", orderMessage("slow", "A", 2, "1"))
	putMessage(t, q, "b.json", orderMessage("b", "A", 3, "1"))
	db := withSearchPath(t, dsn, schema)
	began := time.Now()
	r := mustRun(t, 0, "consume", q, "--db", db, "--sql", sqlFile, "--sql-timeout", "200ms",
		"--retry-max", "2", "--retry-base", "10ms", "--retry-cap", "10ms", "--retry-wait", "1m")
	if st := parseStats(t, r); st.Processed != 2 || st.DeadLetters != 1 {
		t.Fatalf("stats %+v, want 2 processed, slow dead-lettered\n%s", st, r)
	}
	if took := time.Since(began); took > 8*time.Second {
		t.Errorf("the drain took %v: the 5 s statement was not cut short", took)
	}
	var reason, detail string
	if err := admin.QueryRow(`SELECT reason, detail FROM `+schema+`.deliveries WHERE outcome = 'dead-letter'`).Scan(&reason, &detail); err != nil {
		t.Fatal(err)
	}
	if reason != "retries-exhausted" || !strings.Contains(detail, "statement timeout") {
		t.Errorf("dead letter: %s %q, want retries-exhausted after a statement timeout", reason, detail)
	}
	var seen []string
	rows, err := admin.Query(`SELECT msg_id FROM ` + schema + `.seen ORDER BY msg_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, id)
	}
	if strings.Join(seen, ",") != "a,b" {
		t.Errorf("seen %v: want a and b, the cancelled message's insert rolled back", seen)
	}
	// On SQLite, and beyond the lease: refused before anything is consumed.
	q2, _ := workQueue(t)
	putMessage(t, q2, "a.json", orderMessage("a", "A", 1, "1"))
	for _, args := range [][]string{
		{"consume", q2, "--sql", sqlFile, "--sql-timeout", "1s"},
		{"consume", q2, "--db", db, "--sql", sqlFile, "--sql-timeout", "2m"},
	} {
		r := run(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--sql-timeout") {
			t.Errorf("%q: want exit 2 naming --sql-timeout\n%s", args, r)
		}
	}
	if n := countNames(t, q2, inbox); n != 1 {
		t.Errorf("inbox/ of the refused runs holds %d messages, want 1", n)
	}
}
