//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/spoolq/spool/internal/testenv"
)

// witnessRun is an --exec command that records in state/overlaps every
// run of a msg_id that finds another run of it going on. Each run takes a
// flock on state/MSG_ID.lock without waiting, which the kernel holds for
// as long as any process of the run holding it lives: the first run of a
// msg_id holds it for 5 s (started with escape in front: "setsid" makes
// it leave the run's process group, as a daemonising helper does), and a
// later run only tries it.
func witnessRun(state, escape string) string {
	s := shellQuote(state)
	return `lock=` + s + `/$SPOOL_MSG_ID.lock
if [ ! -e ` + s + `/$SPOOL_MSG_ID.ran ]; then
  touch ` + s + `/$SPOOL_MSG_ID.ran
  ` + escape + `flock -n "$lock" sleep 5 || echo "$SPOOL_MSG_ID" >> ` + s + `/overlaps
else
  flock -n "$lock" true || echo "$SPOOL_MSG_ID" >> ` + s + `/overlaps
fi`
}

// requireNoOverlap fails the test if a run of witnessRun found another
// run of its msg_id going on.
func requireNoOverlap(t *testing.T, state string) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(state, "overlaps")); err == nil {
		t.Errorf("msg_ids run twice at once:\n%s", b)
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// requireNoCallsLocks fails the test if a calls lock is left in q: each
// goes with its session's reservations.
func requireNoCallsLocks(t *testing.T, q string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(q, ".calls"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("calls lock left: .calls/%s", e.Name())
	}
}

// TestExecKilledRestartedInPIDNamespace: a consumer killed while its
// --exec runs are in flight is recovered at once by a consumer in a PID
// namespace of its own (a container sharing the host's name and queue),
// which cannot see the dead runs' processes in its /proc, nor kill them.
// It must still never run a msg_id while a run of it goes on: the runs
// hold the dead session's calls lock, which the kernel frees only when
// their last process exits, in whatever namespace. The first runs outlive
// the consumer (only their shells die with it) but not their
// --exec-timeout, far off: only the calls lock can release them sooner.
func TestExecKilledRestartedInPIDNamespace(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("flock"); err != nil {
		testenv.Missing(t, "flock(1) is not installed (util-linux): skipped")
	}
	if out, err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").CombinedOutput(); err != nil {
		testenv.Missing(t, fmt.Sprintf("unshare --pid --fork --mount-proc (util-linux, as root) does not run here: %v %s", err, out))
	}
	for _, engine := range []ledgerBackend{sqliteEngine, postgresEngine, mysqlEngine} {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			execKilledRestartedInPIDNamespace(t, engine)
		})
	}
}

func execKilledRestartedInPIDNamespace(t *testing.T, engine ledgerBackend) {
	const conc, n = 4, 8
	q, state := workQueue(t)
	l := engine.open(t, q)
	for i := range n {
		putMessage(t, q, fmt.Sprintf("m%02d.json", i), orderMessage(fmt.Sprintf("m%02d", i), "A", i+1, "1.00"))
	}
	args := append([]string{"consume", q, "--exec", witnessRun(state, ""), "--exec-timeout", "50s", "--retry-wait", "1m",
		"--concurrency", strconv.Itoa(conc), "--batch", strconv.Itoa(conc)}, l.args...)
	p := start(t, args...)
	waitFor(t, cmdTimeout, "the first runs to hold their locks", func() bool {
		return len(lockHolders(t, state)) >= conc
	})
	if !p.killAfter(t, 0) {
		t.Fatalf("the consumer exited before the kill\n%s", p.result())
	}
	ns := spoolAt{bin: "unshare"}
	r := ns.runWithin(t, cmdTimeout, append([]string{"--pid", "--fork", "--mount-proc", spoolBin}, args...)...)
	if r.code != 0 {
		t.Fatalf("the restart in its own PID namespace: want exit 0\n%s", r)
	}
	if st := parseStats(t, r); st.Processed != n || st.Recovered == 0 {
		t.Errorf("processed %d, recovered %d; want %d, and the dead consumer's claims\n%s", st.Processed, st.Recovered, n, r)
	}
	requireNoOverlap(t, state)
	if !strings.Contains(r.stderr, "proof=\"calls lock free\"") {
		t.Errorf("the restart does not say the calls lock freed the dead consumer's msg_ids\n%s", r.stderr)
	}
	checkCallsSettled(t, q, l, n, 0)
	requireNoCallsLocks(t, q)
	mustRun(t, 0, append([]string{"fsck", q}, l.args...)...)
}

// TestExecShutdownTimeoutHeld: a SIGTERM whose --shutdown-timeout (1 s)
// cuts 8 runs of 5 s short, then a restart at once. A run cut short may
// leave processes behind (here one that left the run's process group,
// which the timeout's kill does not reach), so the stop holds the msg_ids
// it had called exactly as a kill would: their claims stay in
// processing/ and their reservations in the ledger, and only the claims
// whose call never started go back to inbox/. The restart holds those
// msg_ids until no process of the cut runs is left, and no msg_id is ever
// run twice at once; every message is processed once.
func TestExecShutdownTimeoutHeld(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"flock", "setsid"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, tool+"(1) is not installed (util-linux): skipped")
		}
	}
	for _, engine := range []ledgerBackend{sqliteEngine, postgresEngine, mysqlEngine} {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			execShutdownTimeoutHeld(t, engine)
		})
	}
}

func execShutdownTimeoutHeld(t *testing.T, engine ledgerBackend) {
	const conc, n = 8, 16
	q, state := workQueue(t)
	l := engine.open(t, q)
	for i := range n {
		putMessage(t, q, fmt.Sprintf("m%02d.json", i), orderMessage(fmt.Sprintf("m%02d", i), "A", i+1, "1.00"))
	}
	args := append([]string{"consume", q, "--exec", witnessRun(state, "setsid "), "--retry-wait", "1m",
		"--concurrency", strconv.Itoa(conc), "--batch", strconv.Itoa(conc)}, l.args...)
	p := start(t, append(args, "--shutdown-timeout", "1s")...)
	waitFor(t, cmdTimeout, "the first runs to hold their locks", func() bool {
		return len(lockHolders(t, state)) >= conc
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 4 {
		t.Fatalf("a stop that cut calls short: want exit 4\n%s", r)
	}
	if !strings.Contains(r.stderr, "calls cut short, held for recovery") || !strings.Contains(r.stderr, fmt.Sprintf("calls=%d", conc)) {
		t.Errorf("the stop does not say it held the %d calls cut short\n%s", conc, r.stderr)
	}
	if strings.Contains(r.stderr, "claims not called given back to inbox/\" claims="+strconv.Itoa(n)) {
		t.Errorf("the stop gave back the claims it had called\n%s", r.stderr)
	}
	if got := countClaims(t, q); got != conc {
		t.Errorf("processing/ holds %d claims after the stop, want the %d cut short", got, conc)
	}
	if got := l.count(t, "SELECT COUNT(*) FROM %[3]s"); got != conc {
		t.Errorf("%d reservations after the stop, want the %d of the calls cut short", got, conc)
	}
	if got := countNames(t, q, inbox); got != n-conc {
		t.Errorf("inbox/ holds %d after the stop, want the %d never called", got, n-conc)
	}
	r = mustRun(t, 0, args...)
	if st := parseStats(t, r); st.Processed != n || st.Recovered != conc {
		t.Errorf("processed %d, recovered %d; want %d and %d\n%s", st.Processed, st.Recovered, n, conc, r)
	}
	requireNoOverlap(t, state)
	checkCallsSettled(t, q, l, n, 0)
	requireNoCallsLocks(t, q)
	mustRun(t, 0, append([]string{"fsck", q}, l.args...)...)
}
