package handler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool"
)

// Defaults of NotifierOptions.
const (
	// DefaultNotifyTimeout bounds one notification command.
	DefaultNotifyTimeout = 10 * time.Second
	// DefaultNotifyWorkers is how many notification commands run at once.
	DefaultNotifyWorkers = 4
	// DefaultNotifyPending is how many dead letters may wait for a free
	// worker; beyond that a notification is skipped, because consumption
	// must never wait for a notifier.
	DefaultNotifyPending = 32
)

// maxNotifyDetail bounds SPOOL_DETAIL: an environment is not a file.
const maxNotifyDetail = 4 << 10

// ErrBacklog is wrapped by the NotifyError of a dead letter that was not
// notified because Pending notifications were already waiting.
var ErrBacklog = errors.New("notifications already waiting")

// NotifyError is the failure of one dead letter's notification: its
// command failed or timed out, or it was skipped (ErrBacklog).
type NotifyError struct {
	// File is the dead letter's name in error/.
	File string
	// Err is what went wrong: the command's exit status, signal or
	// timeout with the end of its stderr, or ErrBacklog.
	Err error
}

func (e *NotifyError) Error() string { return "notify " + e.File + ": " + e.Err.Error() }
func (e *NotifyError) Unwrap() error { return e.Err }

// NotifierOptions configure a Notifier.
type NotifierOptions struct {
	// Command is run with /bin/sh -c for each dead letter, in a process
	// group of its own, with stdin and stdout closed and, beside the
	// inherited environment, SPOOL_FILE (its name in error/), SPOOL_PATH
	// (its path), SPOOL_ORIGINAL_FILE (its name in inbox/), SPOOL_REASON,
	// SPOOL_DETAIL (at most 4 KiB of it), SPOOL_MSG_ID (empty for a
	// message without a valid key) and SPOOL_QUEUE.
	Command string
	// Queue is the queue's directory, given as SPOOL_QUEUE; it should be
	// absolute.
	Queue string
	// Timeout bounds one run, after which the whole process group is
	// killed. Zero: DefaultNotifyTimeout.
	Timeout time.Duration
	// Workers is how many commands may run at once. Zero:
	// DefaultNotifyWorkers.
	Workers int
	// Pending is how many dead letters may wait for a worker. Zero:
	// DefaultNotifyPending.
	Pending int
	// OnError is told of each notification that failed or was skipped,
	// as a *NotifyError. It is called from the notifier's goroutines and
	// from Deliver, and must be safe for concurrent use. Nil: failures are
	// dropped.
	OnError func(error)
}

// Notifier runs a command for each dead letter on a few goroutines of its
// own, so that the consumer hands a dead letter over and goes on: a slow,
// hanging or failing command costs a NotifyError, never throughput. Its
// Deliver is a spool.Config's OnDelivery; Close stops it.
type Notifier struct {
	o      NotifierOptions
	ctx    context.Context // cancelled when Close gives up waiting
	cancel context.CancelFunc
	jobs   chan notification
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	// abandoned counts notifications dropped because Close gave up.
	abandoned atomic.Int64
}

// notification is one dead letter to tell about.
type notification struct {
	stored, original, reason, detail, msgID string
}

// NewNotifier starts a notifier's workers.
func NewNotifier(o NotifierOptions) *Notifier {
	if o.Timeout <= 0 {
		o.Timeout = DefaultNotifyTimeout
	}
	if o.Workers <= 0 {
		o.Workers = DefaultNotifyWorkers
	}
	if o.Pending <= 0 {
		o.Pending = DefaultNotifyPending
	}
	if o.OnError == nil {
		o.OnError = func(error) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Notifier{o: o, ctx: ctx, cancel: cancel, jobs: make(chan notification, o.Pending)}
	for range o.Workers {
		n.wg.Add(1)
		go n.work()
	}
	return n
}

// Deliver queues a notification for a dead letter, stored under the name
// stored in error/, and ignores any other outcome. It never blocks: with
// Pending notifications waiting already, the dead letter is skipped with an
// ErrBacklog; after Close it is dropped.
func (n *Notifier) Deliver(d *spool.Delivery, r spool.Result, stored string) {
	if r.Outcome != spool.OutcomeDeadLetter {
		return
	}
	job := notification{stored: stored, original: d.File}
	if r.Reject != nil {
		job.reason, job.detail = string(r.Reject.Reason), r.Reject.Detail
	}
	switch {
	case d.Message != nil:
		job.msgID = d.Message.MsgID
	case r.Reject != nil:
		// A poison message's key, when it had a valid one; for a dead
		// letter finished by recovery, the key its record holds.
		job.msgID = r.Reject.MsgID
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	select {
	case n.jobs <- job:
	default:
		n.o.OnError(&NotifyError{File: stored, Err: fmt.Errorf("not notified: %d %w", cap(n.jobs), ErrBacklog)})
	}
}

func (n *Notifier) work() {
	defer n.wg.Done()
	for job := range n.jobs {
		if n.ctx.Err() != nil {
			n.abandoned.Add(1)
			continue
		}
		r := runShell(n.ctx, n.o.Command, n.env(job), nil, n.o.Timeout, nil)
		var err error
		switch {
		case r.err == nil:
			continue
		case r.timedOut:
			err = fmt.Errorf("timed out after %v, process group killed%s", n.o.Timeout, r.detail())
		case r.exitCode > 0:
			err = fmt.Errorf("exit status %d%s", r.exitCode, r.detail())
		default:
			err = fmt.Errorf("%w%s", r.err, r.detail())
		}
		n.o.OnError(&NotifyError{File: job.stored, Err: err})
	}
}

// env is the command's environment: the inherited one and the dead
// letter's SPOOL_* variables.
func (n *Notifier) env(job notification) []string {
	detail := job.detail
	if len(detail) > maxNotifyDetail {
		detail = tailText([]byte(detail[:maxNotifyDetail]), maxNotifyDetail, false) + "..."
	}
	vars := []struct{ name, value string }{
		{"SPOOL_FILE", job.stored},
		{"SPOOL_PATH", filepath.Join(n.o.Queue, "error", job.stored)},
		{"SPOOL_ORIGINAL_FILE", job.original},
		{"SPOOL_REASON", job.reason},
		{"SPOOL_DETAIL", detail},
		{"SPOOL_MSG_ID", job.msgID},
		{"SPOOL_QUEUE", n.o.Queue},
	}
	env := os.Environ()
	for _, v := range vars {
		// A variable cannot hold NUL; these are for people, not keys.
		env = append(env, v.name+"="+strings.ReplaceAll(v.value, "\x00", "\uFFFD"))
	}
	return env
}

// Close stops taking dead letters and waits up to wait for the queued and
// running notifications; then it kills those still running and drops the
// rest, and returns an error saying how many were dropped. Closing again
// does nothing.
func (n *Notifier) Close(wait time.Duration) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	close(n.jobs)
	n.mu.Unlock()
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		n.cancel()
		<-done // bounded: the commands are being killed, the rest skipped
	}
	n.cancel()
	if k := n.abandoned.Load(); k > 0 {
		return fmt.Errorf("%d notifications not run: gave up waiting after %v", k, wait)
	}
	return nil
}
