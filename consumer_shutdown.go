package spool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spoolq/spool/queue"
)

// ErrShutdownTimeout is returned by Drain and Watch when their context was
// cancelled and calls of the Caller were still running
// Config.ShutdownTimeout later: those calls were cancelled, and their
// claims left in processing/ with their msg_ids reserved, exactly as a
// kill leaves them: what a call started may still run (a request at its
// server, a process that left the command's process group), so the next
// consumer's recovery holds those msg_ids until the calls cannot be
// running, then calls them again (see Config.ShutdownTimeout). Nothing is
// wrong with the queue or the ledger; a program tells the operator that
// some calls were cut short.
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
		return fmt.Errorf("%w: %d cut short, held for recovery: their claims are left in processing/ and their msg_ids reserved until the calls cannot be running, their attempts not counted",
			ErrShutdownTimeout, n)
	}
	return nil
}

// unstart sets aside a reserved delivery whose call never started and
// will not in this run: the run is stopping. giveBack returns it to
// inbox/ at the end of the pass.
func (cs *callStage) unstart(it item) {
	cs.backMu.Lock()
	cs.back = append(cs.back, it)
	cs.backMu.Unlock()
}

// giveBack ends a stopping pass with a Caller: the claims set aside
// (unstart) and those of batches that reached the recording stage after
// the stop go back to inbox/ unrecorded, as a recovery would send them
// (I7: a claim without a recorded outcome is consumed again), and their
// reservations are removed. It runs once no call of the pass is in flight
// or settling. The calls cut short by the shutdown timeout are not among
// them: their claims and reservations stay for recovery (leaveCut). The
// reservations and the dedup window's keys go first: a claim back in
// inbox/ may be claimed by another consumer at once, and would wait for
// them. A crash half-way leaves the rest to recovery, which does the
// same.
func (cs *callStage) giveBack() error {
	p, c := cs.p, cs.p.c
	cs.backMu.Lock()
	back := cs.back
	cs.back = nil
	cs.backMu.Unlock()
	if len(back) == 0 {
		return nil
	}
	cr, releaser := c.callLedger.(ClaimReleaser)
	cut := p.sd.cancelled.Load() > 0
	if cut && !releaser {
		// Their reservations cannot be told from those of the calls cut
		// short: they stay with them, for recovery, which holds them all
		// until the calls cannot be running.
		c.log.Info("stopping: claims not called left for recovery with the calls cut short (the ledger releases no single reservation)",
			"claims", len(back))
		return nil
	}
	// All the session's reservations when no call was cut short: every
	// one it still holds is of these claims. Else theirs alone.
	var err error
	if cut {
		claims := make([]string, len(back))
		for i, it := range back {
			claims[i] = it.d.Claim
		}
		_, err = cr.ReleaseClaims(p.work, p.s.ID(), claims)
	} else {
		_, err = c.callLedger.ReleaseReservations(p.work, p.s.ID())
	}
	if err != nil {
		return fmt.Errorf("give back claims not called: %w", err)
	}
	// Their keys in the dedup window too (compare-and-delete of this
	// session's), for the same reason: another consumer's delivery of one
	// would wait for the in-flight TTL instead of calling.
	c.settleWindow(p.work, back, p.s.ID(), true)
	c.moves.Lock()
	defer c.moves.Unlock()
	for _, it := range back {
		if _, err := p.s.Finish(it.claim, queue.Inbox); err != nil {
			return fmt.Errorf("give back claims not called: %w", err)
		}
	}
	if !c.cfg.Relaxed {
		if err := c.dir.Sync(queue.Inbox); err != nil {
			return fmt.Errorf("give back claims not called: %w", err)
		}
	}
	c.log.Info("stopping: claims not called given back to inbox/", "claims", len(back))
	return nil
}

// leaveCut ends a stop whose shutdown timeout cut calls short as a kill
// would: the claims of those calls stay in the session's directory with
// their call marks, and their msg_ids reserved, so that the next recovery
// holds them until the calls cannot be running (the session's calls lock
// is free, or the call bound has passed since), then calls them again.
// What was never called went back already (giveBack), and the claims
// waiting for a retry go back now; the session's lease is left to lapse,
// as a dead session's.
func (c *Consumer) leaveCut(s *queue.Session, lease *leaseKeeper, sd *stopping) error {
	if err := lease.err(); err != nil {
		return c.abandon(s, err)
	}
	if err := c.requeueDue(s, true); err != nil {
		return c.abandon(s, err)
	}
	c.mu.Lock()
	c.waiting = nil
	c.mu.Unlock()
	// Close keeps the directory, not empty, and releases its lock: the
	// next recovery finds the session dead at once.
	if err := s.Close(); err != nil && !errors.Is(err, syscall.ENOTEMPTY) {
		c.log.Warn("claims left for recovery", "session", s.ID(), "err", err)
	}
	c.log.Warn("stopping: calls cut short, held for recovery: their msg_ids stay reserved until the calls cannot be running",
		"calls", sd.cancelled.Load(), "session", s.ID())
	return sd.err()
}
