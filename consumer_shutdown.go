package spool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/queue"
)

// ErrShutdownTimeout is returned by Drain and Watch when their context was
// cancelled and calls of the Caller were still running
// Config.ShutdownTimeout later: those calls were cancelled, and their
// messages given back to inbox/ unrecorded, as if they had never been
// claimed (see Config.ShutdownTimeout). Nothing is wrong with the queue or
// the ledger; a program tells the operator that some calls were cut short.
var ErrShutdownTimeout = errors.New("shutdown timeout: calls in flight were cancelled")

// stopping is a run's graceful stop. The run's context stops the claiming;
// the ledger and the moves use work, never cancelled, so that what was
// claimed and started is finished; callCtx, the context of the Caller's
// calls, is cancelled only Config.ShutdownTimeout after the run's context
// (never, with a zero timeout), which bounds how long a stop waits for a
// slow or silent downstream.
type stopping struct {
	ctx     context.Context // the run's: cancelled, nothing more is claimed or started
	callCtx context.Context
	// cancelled counts the calls cut short by the timeout.
	cancelled atomic.Int64
	stop      func()
}

// newStopping arms the shutdown timeout on ctx, the run's context; stop
// disarms it when the run ends.
func (c *Consumer) newStopping(ctx, work context.Context) *stopping {
	callCtx, cancel := context.WithCancel(work)
	st := &stopping{ctx: ctx, callCtx: callCtx}
	var mu sync.Mutex
	var timer *time.Timer
	ended := false
	after := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !ended && c.cfg.ShutdownTimeout > 0 {
			timer = time.AfterFunc(c.cfg.ShutdownTimeout, cancel)
		}
	})
	st.stop = func() {
		after()
		mu.Lock()
		ended = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
	return st
}

// stopped reports whether the run was asked to stop: nothing more may be
// claimed, and no call started.
func (st *stopping) stopped() bool { return st.ctx.Err() != nil }

// abandoned reports whether a call's failure is only the shutdown timeout
// cutting it short: then it says nothing of the message.
func (st *stopping) abandoned(err error) bool {
	return err != nil && st.callCtx.Err() != nil
}

// err is the run's error for a stop that cancelled calls, nil otherwise.
func (st *stopping) err() error {
	if n := st.cancelled.Load(); n > 0 {
		return fmt.Errorf("%w: %d cut short; their messages are back in inbox/, their attempts not counted",
			ErrShutdownTimeout, n)
	}
	return nil
}

// unstart sets aside a reserved delivery that will not be called in this
// run: the run is stopping and its call had not started, or the shutdown
// timeout cancelled it. giveBack returns it to inbox/ at the end of the
// pass.
func (cs *callStage) unstart(it item) {
	cs.backMu.Lock()
	cs.back = append(cs.back, it)
	cs.backMu.Unlock()
}

// giveBack ends a stopping pass with a Caller: the claims set aside
// (unstart) and those of batches that reached the recording stage after
// the stop go back to inbox/ unrecorded, as a recovery would send them
// (I7: a claim without a recorded outcome is consumed again), and the
// session's reservations are removed. It runs once no call of the pass is
// in flight or settling, so that every reservation the session still holds
// is one of these claims'. The reservations and the dedup window's keys
// go first: a claim back in inbox/ may be claimed by another consumer at
// once, and would wait for them. A crash half-way leaves the rest to recovery, which does the same.
func (cs *callStage) giveBack() error {
	p, c := cs.p, cs.p.c
	cs.backMu.Lock()
	back := cs.back
	cs.back = nil
	cs.backMu.Unlock()
	if len(back) == 0 {
		return nil
	}
	if _, err := c.callLedger.ReleaseReservations(p.work, p.s.ID()); err != nil {
		return fmt.Errorf("give back claims not started: %w", err)
	}
	// Their keys in the dedup window too (compare-and-delete of this
	// session's), for the same reason: another consumer's delivery of one
	// would wait for the in-flight TTL instead of calling.
	c.settleWindow(p.work, back, p.s.ID(), true)
	c.moves.Lock()
	defer c.moves.Unlock()
	for _, it := range back {
		if it.called {
			if err := p.s.ClearCalled(it.claim); err != nil {
				return fmt.Errorf("give back claims not started: %w", err)
			}
		}
		if _, err := p.s.Finish(it.claim, queue.Inbox); err != nil {
			return fmt.Errorf("give back claims not started: %w", err)
		}
	}
	if !c.cfg.Relaxed {
		if err := c.dir.Sync(queue.Inbox); err != nil {
			return fmt.Errorf("give back claims not started: %w", err)
		}
	}
	c.log.Info("stopping: claims not called given back to inbox/", "claims", len(back))
	return nil
}
