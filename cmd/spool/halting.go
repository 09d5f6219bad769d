package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/handler"
)

// A call of --exec or --post can fail for a reason that is no message's:
// the shell could not run the program (exit 126 or 127,
// handler.ErrNotRunnable), or the process has run out of file
// descriptors (EMFILE, ENFILE: the pipes of a command, the socket of a
// request). Counted against the message as any transient failure, it
// would be retried with backoff, the calls paused, and after --retry-max
// attempts dead-lettered, every message alike, while the consumer made
// no progress for minutes and said only "calls paused" (seen at ulimit -n
// 24). Instead the consumer stops (halt): the call fails transiently,
// the run stops as at a signal, the messages go back to inbox/, and
// consume exits with one line saying why: 2 for a command that cannot
// run, 3 for the descriptors.

// halter stops the consumer at the first such failure and keeps its
// error for consume's exit.
type halter struct {
	// what names the handler in the error: `--exec "CMD"`, `--post URL`.
	what string
	halt context.CancelFunc
	mu   sync.Mutex
	err  error
}

// check looks at a call's error, and stops the consumer when it is no
// message's fault; it returns err unchanged.
func (h *halter) check(err error) error {
	var stop error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, handler.ErrNotRunnable):
		stop = &usageError{msg: fmt.Sprintf("%s: %v; consume stopped, the messages it was calling are back in inbox/ (fix the command and run again)", h.what, err)}
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

// halted is the error that stopped the consumer, or nil.
func (h *halter) halted() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// haltingExec is the --exec Caller of spool consume, stopped by its
// halter; embedding keeps Exec's other methods (Kind, the reaper's).
type haltingExec struct {
	*handler.Exec
	h *halter
}

func (e *haltingExec) Call(ctx context.Context, d *spool.Delivery) error {
	return e.h.check(e.Exec.Call(ctx, d))
}

// haltingPost is the --post Caller of spool consume, stopped by its
// halter.
type haltingPost struct {
	*handler.Post
	h *halter
}

func (p *haltingPost) Call(ctx context.Context, d *spool.Delivery) error {
	return p.h.check(p.Post.Call(ctx, d))
}

// halting wraps caller, an --exec or --post handler, with a halter;
// others it returns as they are, with a nil halter.
func halting(caller spool.Caller, hf *handlerFlags) (spool.Caller, *halter) {
	switch c := caller.(type) {
	case *handler.Exec:
		h := &halter{what: fmt.Sprintf("--exec %q", hf.Exec)}
		return &haltingExec{Exec: c, h: h}, h
	case *handler.Post:
		h := &halter{what: "--post " + hf.Post}
		return &haltingPost{Post: c, h: h}, h
	}
	return caller, nil
}
