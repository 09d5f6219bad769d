package handler

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

const (
	// maxStderr bounds the stderr kept of an Exec or Notifier command: its
	// last bytes, where the reason for a failure usually is.
	maxStderr = 4 << 10
	// maxDetailText bounds the command output or response body put into a
	// handler's error. The ledger keeps the first 2000 characters of an
	// error as the dead letter's detail, so the text that follows the
	// error's prefix is cut to fit in them, keeping its end.
	maxDetailText = 1800
)

// shellResult is what became of one shell command.
type shellResult struct {
	err      error // nil: exit status 0
	exitCode int   // the exit status; -1 when it did not exit by itself
	timedOut bool
	stderr   string // the end of its stderr, trimmed
}

// detail is ": STDERR" for an error message, or "" when stderr was empty.
func (r shellResult) detail() string {
	if r.stderr == "" {
		return ""
	}
	return ": " + r.stderr
}

// runShell runs command with /bin/sh -c in a process group of its own,
// stdin fed from stdin (nil: /dev/null), stdout discarded, the end of
// stderr kept, and extra open in it from descriptor 3 on. After timeout, or when ctx is done, the whole group is
// killed, so a command that started children of its own cannot outlive
// its bound; WaitDelay then stops waiting for descendants that escaped
// the group but still hold stderr open.
//
// The shell dies with the consumer: it gets SIGKILL when the thread that
// started it exits (PR_SET_PDEATHSIG), which a killed process's threads
// all do. That signal fires on the death of the forking thread, not of
// the process, and the Go runtime ends a thread whose goroutine exits
// while locked to it; so the goroutine that starts the shell stays locked
// to its thread until the shell is reaped, and that thread outlives the
// shell unless the process dies. The shell's own children do not get the
// signal (it is not inherited): they hold the calls lock passed in extra
// (Exec), which keeps their msg_ids from being run again, and a recovering
// consumer kills those it can see (Exec's ReapCalls).
func runShell(ctx context.Context, command string, env []string, stdin []byte, timeout time.Duration, extra []*os.File) shellResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Env = env
	cmd.ExtraFiles = extra
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	tail := &tailBuffer{max: maxStderr}
	cmd.Stderr = tail
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState.Success() {
		// It succeeded; a descendant it left behind kept stderr open.
		err = nil
	}
	r := shellResult{err: err, exitCode: -1, stderr: tail.text(maxDetailText)}
	if err == nil {
		r.exitCode = 0
		return r
	}
	r.timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	var ee *exec.ExitError
	if errors.As(err, &ee) && !r.timedOut {
		r.exitCode = ee.ExitCode()
	}
	return r
}

// tailBuffer is an io.Writer that keeps the last max bytes written to it.
type tailBuffer struct {
	max     int
	buf     []byte
	dropped bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > t.max {
		p, t.dropped = p[len(p)-t.max:], true
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf, t.dropped = append(t.buf[:0], t.buf[over:]...), true
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// text returns at most limit bytes of the end of what was written, trimmed,
// as valid UTF-8, with "..." in front when the beginning was dropped.
func (t *tailBuffer) text(limit int) string {
	return tailText(t.buf, limit, t.dropped)
}

// tailText is the end of b as text: at most limit bytes, trimmed, valid
// UTF-8, marked with "..." when something was cut.
func tailText(b []byte, limit int, cut bool) string {
	b = bytes.TrimSpace(b)
	if len(b) > limit {
		b, cut = b[len(b)-limit:], true
		for len(b) > 0 && !utf8.RuneStart(b[0]) {
			b = b[1:] // a rune cut in half
		}
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if cut && s != "" {
		s = "..." + s
	}
	return s
}
