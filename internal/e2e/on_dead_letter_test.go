//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// --on-dead-letter end to end: one notification per dead letter, never
// holding back the consumer, killed when it hangs.

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
