package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool"
)

// Notification limits of consume --on-dead-letter.
const (
	defaultNotifyTimeout = 10 * time.Second
	// notifyWorkers is how many notification commands run at once.
	notifyWorkers = 4
	// notifyPending is how many dead letters may wait for a free worker;
	// beyond that a notification is skipped with a warning, because
	// consumption must never wait for a notifier.
	notifyPending = 32
	// maxNotifyDetail bounds SPOOL_DETAIL: an environment is not a file.
	maxNotifyDetail = 4 << 10
)

// notifyFlags are consume's flags for telling an operator about dead
// letters.
type notifyFlags struct {
	fs      *flag.FlagSet
	command string
	timeout time.Duration
}

// addNotifyFlags registers --on-dead-letter and its timeout on fs.
func addNotifyFlags(fs *flag.FlagSet) *notifyFlags {
	nf := &notifyFlags{fs: fs}
	fs.StringVar(&nf.command, "on-dead-letter", "", "run `CMD` with /bin/sh -c after a message lands in error/ (SPOOL_FILE, SPOOL_REASON, SPOOL_DETAIL, SPOOL_QUEUE); its failure is only logged")
	fs.DurationVar(&nf.timeout, "on-dead-letter-timeout", defaultNotifyTimeout, "kill an --on-dead-letter command (its process group) after `DURATION`")
	return nf
}

// check validates the flags.
func (nf *notifyFlags) check(e *env) error {
	set := false
	nf.fs.Visit(func(f *flag.Flag) { set = set || f.Name == "on-dead-letter" })
	if set && strings.TrimSpace(nf.command) == "" {
		return e.usage("--on-dead-letter is empty")
	}
	if nf.timeout <= 0 {
		return e.usage("--on-dead-letter-timeout %v: want a positive duration", nf.timeout)
	}
	return nil
}

// notification is one dead letter to tell about.
type notification struct {
	stored, original, reason, detail, msgID string
}

// notifier runs the --on-dead-letter command for each dead letter on a few
// goroutines of its own, so that the consumer hands a dead letter over
// and goes on: a slow, hanging or failing command costs a warning on
// stderr, never throughput.
type notifier struct {
	command string
	queue   string // absolute
	timeout time.Duration
	warn    func(format string, args ...any)

	ctx    context.Context // cancelled when close gives up waiting
	cancel context.CancelFunc
	jobs   chan notification
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	// abandoned counts notifications dropped because close gave up.
	abandoned atomic.Int64
}

// newNotifier starts workers goroutines running command for the dead
// letters handed to deliver, with at most pending of them waiting.
func newNotifier(command, queueDir string, timeout time.Duration, workers, pending int, warn func(string, ...any)) (*notifier, error) {
	abs, err := filepath.Abs(queueDir)
	if err != nil {
		return nil, fmt.Errorf("queue path: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &notifier{command: command, queue: abs, timeout: timeout, warn: warn,
		ctx: ctx, cancel: cancel, jobs: make(chan notification, pending)}
	for range workers {
		n.wg.Add(1)
		go n.work()
	}
	return n, nil
}

// deliver is the consumer's OnDelivery hook: it queues a notification for
// a dead letter and never blocks.
func (n *notifier) deliver(d *spool.Delivery, r spool.Result, stored string) {
	if r.Outcome != spool.OutcomeDeadLetter {
		return
	}
	job := notification{stored: stored, original: d.File}
	if r.Reject != nil {
		job.reason, job.detail = string(r.Reject.Reason), r.Reject.Detail
	}
	if d.Message != nil {
		job.msgID = d.Message.MsgID
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	select {
	case n.jobs <- job:
	default:
		n.warn("on-dead-letter: %s not notified: %d notifications already waiting", stored, cap(n.jobs))
	}
}

func (n *notifier) work() {
	defer n.wg.Done()
	for job := range n.jobs {
		if n.ctx.Err() != nil {
			n.abandoned.Add(1)
			continue
		}
		r := runShell(n.ctx, n.command, n.env(job), nil, n.timeout)
		switch {
		case r.err == nil:
		case r.timedOut:
			n.warn("on-dead-letter %s: timed out after %v, process group killed%s", job.stored, n.timeout, r.detail())
		case r.exitCode > 0:
			n.warn("on-dead-letter %s: exit status %d%s", job.stored, r.exitCode, r.detail())
		default:
			n.warn("on-dead-letter %s: %v%s", job.stored, r.err, r.detail())
		}
	}
}

// env is the command's environment: the inherited one and the dead
// letter's SPOOL_* variables.
func (n *notifier) env(job notification) []string {
	detail := job.detail
	if len(detail) > maxNotifyDetail {
		detail = tailText([]byte(detail[:maxNotifyDetail]), maxNotifyDetail, false) + "..."
	}
	vars := []struct{ name, value string }{
		{"SPOOL_FILE", job.stored},
		{"SPOOL_PATH", filepath.Join(n.queue, "error", job.stored)},
		{"SPOOL_ORIGINAL_FILE", job.original},
		{"SPOOL_REASON", job.reason},
		{"SPOOL_DETAIL", detail},
		{"SPOOL_MSG_ID", job.msgID},
		{"SPOOL_QUEUE", n.queue},
	}
	env := os.Environ()
	for _, v := range vars {
		// A variable cannot hold NUL; these are for people, not keys.
		env = append(env, v.name+"="+strings.ReplaceAll(v.value, "\x00", "\uFFFD"))
	}
	return env
}

// close stops taking dead letters and waits up to wait for the queued and
// running notifications; then it kills those still running, drops the
// rest and says how many were dropped.
func (n *notifier) close(wait time.Duration) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
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
		n.warn("on-dead-letter: %d notifications not run: gave up waiting after %v", k, wait)
	}
}

// lockedWriter serialises whole writes to w: the logger and the notifier's
// goroutines share stderr, and each line must reach it in one piece.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
