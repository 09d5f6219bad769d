//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Handlers end to end, driven through the binary against real processes,
// a real local HTTP server and the real ledger file (work_helpers_test.go):
// here --exec and the retry schedule; --sql in sql_handler_test.go, --post
// in post_handler_test.go and calls*_test.go, --on-dead-letter in
// on_dead_letter_test.go.

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

	// The script stamps each attempt as it starts; consume logs each
	// retry it schedules; the ledger says when each failed attempt began
	// and when the next was due, for the states the poll saw (each lasts
	// its delay, which a poll stalled on a loaded machine can miss: one
	// seen is enough, each seen must be right).
	ts := stamps(t, filepath.Join(state, "attempts.FLAKY"))
	scheduled := regexp.MustCompile(`msg="retry scheduled" file=flaky\.json msg_id=FLAKY attempt=(\d)`).FindAllStringSubmatch(r.stderr, -1)
	if len(ts) != 4 || len(scheduled) != 3 || len(states) == 0 {
		t.Fatalf("FLAKY was attempted %d times, %d retries logged, %d retry states seen in the ledger (%+v); want 4, 3 and some\n%s", len(ts), len(scheduled), len(states), states, r)
	}
	for i, m := range scheduled {
		if m[1] != strconv.Itoa(i+1) {
			t.Errorf("retry %d logged as attempt %s", i+1, m[1])
		}
	}
	for i, s := range states {
		if s.Attempts < 1 || s.Attempts > 3 {
			t.Fatalf("the ledger holds %+v, want attempts 1 to 3", s)
		}
		delay := 100 * time.Millisecond << (s.Attempts - 1) // the policy's delay after that attempt: growing
		if s.NextAt.Sub(s.LastFailure) != delay {
			t.Errorf("after attempt %d the ledger holds %+v, want the next due %v after its failure", s.Attempts, s, delay)
		}
		if wait := ts[s.Attempts].Sub(s.LastFailure); wait < delay || wait > delay+2*time.Second {
			t.Errorf("attempt %d came %v after attempt %d failed, want its delay %v (and not much more)", s.Attempts+1, wait, s.Attempts, delay)
		}
		// The same gap as the ledger saw it: transaction start to start.
		if i > 0 && states[i-1].Attempts == s.Attempts-1 {
			if gap := s.LastFailure.Sub(states[i-1].LastFailure); gap < delay/2 {
				t.Errorf("attempts %d and %d began %v apart in the ledger, want at least %v", s.Attempts-1, s.Attempts, gap, delay/2)
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
