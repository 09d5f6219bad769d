package handler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/spoolq/spool"
)

// A call of Exec or Post (--exec, --post) can fail for a reason that is no message's:
// the shell could not run the program (exit 126 or 127,
// ErrNotRunnable), or the process has run out of file
// descriptors (EMFILE, ENFILE: the pipes of a command, the socket of a
// request). Counted against the message as any transient failure, it
// would be retried with backoff, the calls paused, and after --retry-max
// attempts dead-lettered, every message alike, while the consumer made
// no progress for minutes and said only "calls paused" (seen at ulimit -n
// 24). Instead the consumer stops (halt): the call fails transiently,
// the run stops as at a signal, the messages go back to inbox/, and
// consume exits with one line saying why: 2 for a command that cannot
// run, 3 for the descriptors.

// Halter stops the consumer at the first such failure and keeps its
// error for the run's result (Err).
type Halter struct {
	// what names the handler in the error: `--exec "CMD"`, `--post URL`.
	what string
	halt context.CancelFunc
	mu   sync.Mutex
	err  error
}

// check looks at a call's error, and stops the consumer when it is no
// message's fault; it returns err unchanged.
func (h *Halter) check(err error) error {
	var stop error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotRunnable):
		stop = &OptionError{Msg: fmt.Sprintf("%s: %v; consume stopped, the messages it was calling are back in inbox/ (fix the command and run again)", h.what, err), Content: true}
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		limit := "?"
		var rl syscall.Rlimit
		if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
			limit = fmt.Sprint(rl.Cur)
		}
		stop = fmt.Errorf("%s: out of file descriptors (%v; this process may open %s); consume stopped, the messages it was calling are back in inbox/. "+
			"Try: raise the limit (ulimit -n, LimitNOFILE= in a systemd unit) or lower --concurrency", h.what, err, limit)
	default:
		return err
	}
	h.mu.Lock()
	if h.err == nil {
		h.err = stop
	}
	h.mu.Unlock()
	h.halt()
	return err
}

// Stops sets what stops the consumer's run: its context's cancel. It is
// set before the run's first call.
func (h *Halter) Stops(cancel context.CancelFunc) { h.halt = cancel }

// Err is the error that stopped the consumer, or nil: an *OptionError
// for a command that cannot run, another error for the descriptors.
func (h *Halter) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// haltingExec is an Exec stopped by its Halter; embedding keeps Exec's
// other methods (Kind, the reaper's).
type haltingExec struct {
	*Exec
	h *Halter
}

func (e *haltingExec) Call(ctx context.Context, d *spool.Delivery) error {
	return e.h.check(e.Exec.Call(ctx, d))
}

// haltingPost is a Post stopped by its Halter.
type haltingPost struct {
	*Post
	h *Halter
}

func (p *haltingPost) Call(ctx context.Context, d *spool.Delivery) error {
	return p.h.check(p.Post.Call(ctx, d))
}

// Halting wraps caller, the Exec or Post that Build made, with a
// Halter, which stops the run at a call that fails for no message's
// fault; another caller it returns as it is, with a nil Halter.
func (o *Options) Halting(caller spool.Caller) (spool.Caller, *Halter) {
	switch c := caller.(type) {
	case *Exec:
		h := &Halter{what: fmt.Sprintf("--exec %q", o.Exec)}
		return &haltingExec{Exec: c, h: h}, h
	case *Post:
		h := &Halter{what: "--post " + o.Post}
		return &haltingPost{Post: c, h: h}, h
	}
	return caller, nil
}
