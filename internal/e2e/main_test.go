//go:build linux

package e2e

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// spoolBin is the spool binary under test, built once by TestMain.
var spoolBin string

func TestMain(m *testing.M) {
	if os.Getenv(hogInotifyEnv) != "" {
		os.Exit(hogInotify()) // a helper process of TestWatchNoNotifications
	}
	flag.Parse()
	waitInParallel()
	os.Exit(runMain(m))
}

// waitInParallel lets 4 tests per CPU run at once in the quick run, and
// 2 per CPU under -race or in the long run, unless -parallel says
// otherwise. Go's default, one per CPU, suits tests that compute; these
// mostly wait (on spool processes, fsync, local servers, brokers and
// timers), and nearly all are parallel, so with one per core the cores
// idle: a long run with -race at the default used under one of two cores
// on average and took 28 minutes for the e2e package alone. Under -race
// spool computes more (its build is instrumented), and the long run's
// large queues and kill storms do too, so there fewer run at once than in
// the quick run, which keeps each test's deadlines far.
func waitInParallel() {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if given {
		return
	}
	perCPU := 4
	if raceEnabled || testenv.IsLong() {
		perCPU = 2
	}
	_ = flag.Set("test.parallel", strconv.Itoa(perCPU*runtime.GOMAXPROCS(0)))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "spool-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	spoolBin = filepath.Join(dir, "spool")
	// go test puts $GOROOT/bin first in PATH, so this is the toolchain that
	// builds the tests themselves.
	goTool, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: go tool not found:", err)
		return 1
	}
	args := []string{"build", "-o", spoolBin}
	if raceSpool() {
		args = append(args, "-race")
		quickRaceExit()
	}
	args = append(args, "github.com/spoolq/spool/cmd/spool")
	build := exec.Command(goTool, args...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go %s: %v\n", strings.Join(args, " "), err)
		return 1
	}
	defer closeBrowser()
	return m.Run()
}

// raceSpool reports whether the spool binary under test is built with
// -race: under the race detector at the quick sizes. The long run's kill
// storms, million-record drains and soaks run a plain build even under
// -race: they test what survives kills and volume, and the race-built
// binary, 20 to 40 times slower on SQLite, took the package past its
// 25-minute timeout on two cores. CI runs the long sizes, the harness
// race-built; `go test -race ./internal/e2e` at the quick sizes runs every
// scenario against a race-built spool.
func raceSpool() bool { return raceEnabled && !testenv.IsLong() }

// quickRaceExit makes the race-instrumented spool processes the tests
// start exit as soon as they are done. By default the race runtime sleeps
// a second before a process exits (GORACE's atexit_sleep_ms=1000), letting
// goroutines still running after main returns go on, and maybe race, a
// little longer. The tests start thousands of processes, and that second
// each was most of the e2e package's time under -race (spool status took
// 1.12 s, against 0.013 s for the plain build). A race is still reported
// when it happens, and the process still exits 66, which no test expects.
// A GORACE that already sets atexit_sleep_ms is kept as given.
func quickRaceExit() {
	g := os.Getenv("GORACE")
	if strings.Contains(g, "atexit_sleep_ms") {
		return
	}
	_ = os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
}

// cmdTimeout bounds one command that is expected to finish by itself: a
// hang (a FIFO opened for reading, a lost lock) fails the test instead of
// stalling it.
const cmdTimeout = 2 * time.Minute

// result is what one spool invocation did.
type result struct {
	args   []string
	stdout string
	stderr string
	code   int // exit status; -1 when killed by a signal
}

func (r result) String() string {
	return fmt.Sprintf("spool %q: exit %d\nstdout:\n%s\nstderr:\n%s", r.args, r.code, r.stdout, r.stderr)
}

// run runs spool with args and returns what it did; it fails the test if
// spool cannot be started or does not finish within cmdTimeout.
func run(t testing.TB, args ...string) result {
	t.Helper()
	return runWithin(t, cmdTimeout, args...)
}

// runWithin is run with another deadline.
func runWithin(t testing.TB, timeout time.Duration, args ...string) result {
	t.Helper()
	return spoolAt{bin: spoolBin}.runWithin(t, timeout, args...)
}

// mustRun runs spool and fails the test unless it exits with want.
func mustRun(t testing.TB, want int, args ...string) result {
	t.Helper()
	r := run(t, args...)
	if r.code != want {
		t.Fatalf("want exit %d, got\n%s", want, r)
	}
	return r
}

// consumeStats is the summary line of spool consume.
type consumeStats struct {
	Processed, Duplicates, DeadLetters, Recovered int
}

var statsLine = regexp.MustCompile(`(?m)^processed=(\d+) duplicates=(\d+) dead-letters=(\d+) recovered=(\d+)$`)

// parseStats finds consume's summary line on stdout.
func parseStats(t testing.TB, r result) consumeStats {
	t.Helper()
	m := statsLine.FindAllStringSubmatch(r.stdout, -1)
	if len(m) != 1 {
		t.Fatalf("want exactly one line processed=N duplicates=N dead-letters=N recovered=N on stdout, got %d\n%s", len(m), r)
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[0][i]); return v }
	return consumeStats{n(1), n(2), n(3), n(4)}
}

// killed reports whether a finished command was ended by SIGKILL.
func killed(ps *os.ProcessState) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// proc is a spool process running in the background.
type proc struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	errb   bytes.Buffer
	done   chan struct{}
	err    error
	killed bool // ended by SIGKILL
}

// start starts spool in the background.
func start(t testing.TB, args ...string) *proc {
	t.Helper()
	return spoolAt{bin: spoolBin}.start(t, args...)
}

// wait waits for p to exit, failing the test after cmdTimeout.
func (p *proc) wait(t testing.TB) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(cmdTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("spool %q did not finish within %v\nstdout:\n%s\nstderr:\n%s", p.cmd.Args[1:], cmdTimeout, p.out.String(), p.errb.String())
	}
	return p.result()
}

func (p *proc) result() result {
	r := result{args: p.cmd.Args[1:], stdout: p.out.String(), stderr: p.errb.String()}
	if p.err != nil {
		r.code = p.cmd.ProcessState.ExitCode()
	}
	return r
}

// freeze stops p (SIGSTOP) and returns once every thread of it is
// stopped. kill(2) only queues the signal: a thread running on another
// CPU goes on until it next leaves the kernel, so a test that changes the
// queue right after the signal could still be seen by it.
func (p *proc) freeze(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	task := fmt.Sprintf("/proc/%d/task", p.cmd.Process.Pid)
	if !poll(cmdTimeout, time.Millisecond, func() bool { return allStopped(task) }) {
		t.Fatalf("spool %q: not every thread stopped within %v of SIGSTOP", p.cmd.Args[1:], cmdTimeout)
	}
}

// allStopped reports whether every thread under task (/proc/PID/task) is
// in state T (stopped by a signal).
func allStopped(task string) bool {
	des, err := os.ReadDir(task)
	if err != nil || len(des) == 0 {
		return false
	}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(task, de.Name(), "stat"))
		if err != nil {
			return false
		}
		// pid (comm) STATE ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

// killAfter waits up to d for p to exit by itself, then sends SIGKILL. It
// reports whether the kill hit a live process (false: it had exited before).
func (p *proc) killAfter(t testing.TB, d time.Duration) bool {
	t.Helper()
	select {
	case <-p.done:
		return false
	case <-time.After(d):
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	return p.killed
}
