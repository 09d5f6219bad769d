package handler

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool"
)

const (
	// DefaultExecTimeout is Exec's Timeout when it is zero.
	DefaultExecTimeout = 30 * time.Second
	// ExitTempFail is sysexits.h's EX_TEMPFAIL: an Exec command that exits
	// with it asks for a retry.
	ExitTempFail = 75
)

// Exec runs a shell command for each message (spool consume --exec): the
// message on stdin, and in the environment, beside the inherited one,
// SPOOL_MSG_ID, SPOOL_ORDER_NO, SPOOL_SEQ, SPOOL_AMOUNT (empty when the
// message lacks them), SPOOL_FILE (its name in inbox/), SPOOL_QUEUE and
// SPOOL_CONSUMER (the consumer's session, Delivery.Consumer).
//
// Every process of a run holds the consumer session's calls lock open
// (spool.LockingCaller): the shell gets it as descriptor 3 (CallsLockFD,
// named by SPOOL_CALLS_LOCK=3 in the environment) and passes it on to
// whatever it starts, and a run must neither close nor reuse it. A run
// dies with its consumer: the shell gets SIGKILL when the consumer dies,
// and a consumer that recovers the dead one's claims kills every process
// it can see still marked with its SPOOL_CONSUMER (ReapCalls), and holds
// the msg_ids of its runs until no process holds the lock any more, in
// whatever PID namespace it runs, or the call bound has passed, so that
// no msg_id is run again while a run of it goes on.
//
// Exit status 0 is success. ExitTempFail, a timeout, a death by a signal
// and a failure to start are transient failures, and so are 126 and 127,
// the shell's "cannot execute" and "not found", which wrap ErrNotRunnable
// (spool consume stops at them); any other exit status is permanent. The command's stdout is discarded; the end of its stderr is
// the failure's detail.
//
// An Exec is safe for concurrent use; its fields must not change while it
// is in use.
type Exec struct {
	// Command is run with /bin/sh -c, in a process group of its own.
	Command string
	// Timeout bounds one run: after it the whole process group is killed
	// and the message retried. Zero: DefaultExecTimeout.
	Timeout time.Duration
	// Queue is the queue's directory, given to the command as
	// SPOOL_QUEUE. It should be absolute: the command may change
	// directory.
	Queue string
}

// Call runs the command on d's message. An Exec is a spool.Caller: its
// effect is outside the ledger, so the consumer calls it outside any
// ledger transaction.
func (h *Exec) Call(ctx context.Context, d *spool.Delivery) error {
	lock := d.CallsLock
	env, err := h.env(d, lock != nil)
	if err != nil {
		return err
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultExecTimeout
	}
	var extra []*os.File
	if lock != nil {
		extra = []*os.File{lock} // CallsLockFD
	}
	r := runShell(ctx, h.Command, env, d.Message.Raw, timeout, extra)
	switch {
	case r.err == nil:
		return nil
	case r.timedOut:
		return &timeoutError{msg: fmt.Sprintf("exec: timed out after %v, process group killed%s", timeout, r.detail())}
	case r.exitCode == ExitTempFail:
		return fmt.Errorf("exec: exit status %d (temporary failure)%s", r.exitCode, r.detail())
	case notRunnable(r.exitCode):
		// The shell could not run the program: transient, so that no
		// message is dead-lettered for the configuration's fault.
		return fmt.Errorf("exec: exit status %d: %w%s", r.exitCode, ErrNotRunnable, r.detail())
	case r.exitCode > 0:
		return spool.Permanent(fmt.Errorf("exec: exit status %d%s", r.exitCode, r.detail()))
	}
	// Killed by a signal nobody here sent (the OOM killer, an operator), or
	// not started at all: nothing says the message is at fault.
	return fmt.Errorf("exec: %w%s", r.err, r.detail())
}

// CallsLockFD is the descriptor on which an Exec's command finds the
// consumer session's calls lock (SPOOL_CALLS_LOCK names it): the first
// after stdin, stdout and stderr.
const CallsLockFD = 3

// callsLockVar names CallsLockFD in a run's environment.
const callsLockVar = "SPOOL_CALLS_LOCK"

// HoldsCallsLock reports true: every run holds the consumer session's
// calls lock, and so does every process it starts that keeps its
// descriptors (spool.LockingCaller).
func (h *Exec) HoldsCallsLock() bool { return true }

var (
	_ spool.LockingCaller = (*Exec)(nil)
	_ spool.CallReaper    = (*Exec)(nil)
	_ spool.TimeoutCaller = (*Exec)(nil)
)

// Kind is "exec" (spool.Kinded), the handler kind metrics report.
func (h *Exec) Kind() string { return "exec" }

// timeoutError is the failure of a run killed at its Timeout: transient,
// and a timeout (its Timeout method, and errors.Is context.DeadlineExceeded)
// for metrics, which count timeouts apart from other failures.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string { return e.msg }

// Timeout reports true: the run was killed at its bound.
func (e *timeoutError) Timeout() bool { return true }

// Is makes errors.Is(err, context.DeadlineExceeded) hold.
func (e *timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// CallTimeout is the bound of one run (spool.TimeoutCaller).
func (h *Exec) CallTimeout() time.Duration {
	if h.Timeout <= 0 {
		return DefaultExecTimeout
	}
	return h.Timeout
}

// env is the command's environment: the inherited one and the message's
// SPOOL_* variables, with SPOOL_CALLS_LOCK if lock is set. A value holding
// NUL, which no environment can carry, is a permanent failure.
func (h *Exec) env(d *spool.Delivery, lock bool) ([]string, error) {
	m := d.Message
	seq := ""
	if m.Seq != 0 {
		seq = strconv.FormatInt(m.Seq, 10)
	}
	vars := []struct{ name, value string }{
		{"SPOOL_MSG_ID", m.MsgID}, {"SPOOL_ORDER_NO", m.OrderNo}, {"SPOOL_SEQ", seq},
		{"SPOOL_AMOUNT", string(m.Amount)}, {"SPOOL_FILE", fileName(d)}, {"SPOOL_QUEUE", h.Queue},
		{consumerVar, d.Consumer},
	}
	env := os.Environ()
	for _, v := range vars {
		if strings.IndexByte(v.value, 0) >= 0 {
			// The message on stdin is exact; a variable cannot be, and a
			// mangled key would defeat the command's own idempotency.
			return nil, spool.Permanent(fmt.Errorf("exec: %s holds a NUL byte, which the environment cannot carry", v.name))
		}
		env = append(env, v.name+"="+v.value)
	}
	if lock {
		env = append(env, callsLockVar+"="+strconv.Itoa(CallsLockFD))
	}
	return env, nil
}

// fileName is the delivery's name in inbox/ as the ledger stores it in
// processed.file: invalid UTF-8 and NUL replaced by U+FFFD. Handlers pass
// the stored name on, so that what they write matches the ledger's row.
func fileName(d *spool.Delivery) string {
	return strings.ReplaceAll(strings.ToValidUTF8(d.File, "\uFFFD"), "\x00", "\uFFFD")
}
