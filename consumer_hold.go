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

// errPaused is the cause of a drain's stop at an operator's pause.
var errPaused = errors.New("the queue is paused")

// holdWatch is what a consumer knows of the operator's pause of its queue
// and of the msg_ids held (HoldLedger, hold.go): read at the start of a
// run (begin) and then every Config.HoldInterval by a goroutine of its own
// (loop), so that no claim and no call waits for the ledger. It outlives
// a run, so that a consumer run again says a pause once, not at each run.
//
// While the queue is paused, or before a read has succeeded, claimChunk
// and callStage.start wait (wait); the claims and calls already made go
// on. A drain instead stops at a pause as at a signal (its context is
// cancelled, onPause): it finishes what it started, gives back what it did
// not call, and ends (Stats.Paused). A held msg_id is looked up in ids by
// the examining workers (isHeld); the set is replaced, never changed, so
// the lookup takes no lock.
type holdWatch struct {
	c     *Consumer
	l     HoldLedger
	every time.Duration

	ids atomic.Pointer[map[string]struct{}]

	// mu guards what follows. change is closed and replaced whenever the
	// pause changes (or the first read succeeds), waking wait.
	mu      sync.Mutex
	known   bool   // a read has succeeded
	paused  *Pause // the pause as last read
	version int64
	change  chan struct{}
	failing bool // the last read failed (said once)
	onPause func()
}

func newHoldWatch(c *Consumer) *holdWatch {
	l, ok := c.ledger.(HoldLedger)
	if !ok {
		return nil
	}
	return &holdWatch{c: c, l: l, every: c.cfg.HoldInterval, change: make(chan struct{})}
}

// watchHolds begins a run's reading of the pause and holds: it reads them
// once before anything is claimed, then every HoldInterval until the
// returned end is called, which also says in st whether a pause ended the
// run. A drain's first read that fails fails the run (its cron is the
// retry); a watch's waits for a read that succeeds before it claims. A
// drain's context is replaced by one that a pause cancels.
func (c *Consumer) watchHolds(ctx context.Context, watch bool) (context.Context, func(st *Stats), error) {
	h := c.holds
	if h == nil {
		return ctx, func(*Stats) {}, nil
	}
	var cancel context.CancelCauseFunc
	run := ctx
	if !watch {
		run, cancel = context.WithCancelCause(ctx)
	}
	h.mu.Lock()
	h.onPause = nil
	if cancel != nil {
		h.onPause = func() { cancel(errPaused) }
	}
	h.mu.Unlock()
	if err := h.read(ctx, watch); err != nil && !watch {
		cancel(nil)
		return ctx, nil, fmt.Errorf("consume: %w", err)
	}
	loopCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { h.loop(loopCtx, watch) })
	return run, func(st *Stats) {
		stop()
		wg.Wait()
		if cancel != nil {
			st.Paused = errors.Is(context.Cause(run), errPaused)
			cancel(nil)
		}
	}, nil
}

func (h *holdWatch) loop(ctx context.Context, watch bool) {
	t := time.NewTimer(h.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = h.read(ctx, watch) // said once by read; the last state stands meanwhile
		t.Reset(h.every)
	}
}

// read reads the pause and holds once and takes them in, saying a change
// of the pause, and a failure once (the state last read stands
// meanwhile: a ledger that cannot be read cannot record claims either).
func (h *holdWatch) read(ctx context.Context, watch bool) error {
	h.mu.Lock()
	version := h.version
	if !h.known {
		version = -1 // no set read yet: ask for it
	}
	h.mu.Unlock()
	got, err := h.l.Holds(ctx, version)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil && !h.failing {
			h.failing = true
			h.c.log.Warn("cannot read the queue's pause and holds from the ledger; going on with what was read last, retried every interval",
				"err", err, "interval", h.every)
		}
		return fmt.Errorf("read the queue's pause and holds: %w", err)
	}
	if h.failing {
		h.failing = false
		h.c.log.Info("the queue's pause and holds are read again")
	}
	if got.MsgIDs != nil {
		ids := got.MsgIDs
		h.ids.Store(&ids)
	}
	was, first := h.paused, !h.known
	h.known, h.paused, h.version = true, got.Paused, got.Version
	switch p := got.Paused; {
	case p != nil && (was == nil || first):
		if watch {
			h.c.log.Warn("queue paused: no new claims or calls until it is resumed (spool resume DIR); those under way finish",
				"by", p.By, "at", p.At, "note", p.Note)
		} else {
			h.c.log.Warn("queue paused: the drain claims nothing more; what it claimed is finished or given back, and it ends (spool resume DIR lets consumers go on)",
				"by", p.By, "at", p.At, "note", p.Note)
		}
		if h.onPause != nil {
			h.onPause()
		}
	case p == nil && was != nil && !first:
		h.c.log.Info("queue resumed: consuming again")
	}
	if first || (was == nil) != (got.Paused == nil) {
		close(h.change)
		h.change = make(chan struct{})
	}
	return nil
}

// wait returns once claims and calls may go on: the queue is not paused,
// as last read, and a read has succeeded. It returns ctx's error once ctx
// is done, and errStopScan once stop is closed.
func (c *Consumer) holdWait(ctx context.Context, stop <-chan struct{}) error {
	h := c.holds
	if h == nil {
		return nil
	}
	for {
		h.mu.Lock()
		ok, ch := h.known && h.paused == nil, h.change
		h.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return errStopScan
		}
	}
}

// isHeld reports whether an operator holds msgID, as last read.
func (h *holdWatch) isHeld(msgID string) bool {
	ids := h.ids.Load()
	if ids == nil || msgID == "" {
		return false
	}
	_, ok := (*ids)[msgID]
	return ok
}

// heldAside moves the claim of d into held/ when an operator holds its
// msg_id (a valid message's, or a rejected one's when its key could be
// read), instead of recording it, and reports whether it did. The claim
// is recorded nowhere but in the hold (RecordHeld); if the msg_id was
// released meanwhile, the file goes back to inbox/ at once, to be claimed
// again. A failure leaves the claim for recovery, or, once it is in held/
// and cannot be recorded nor put back, the file there unrecorded, and
// fails the run.
func (c *Consumer) heldAside(s *queue.Session, cl *queue.Claim, d *Delivery) (bool, error) {
	h := c.holds
	if h == nil {
		return false, nil
	}
	id := ""
	switch {
	case d.Message != nil:
		id = d.Message.MsgID
	case d.Reject != nil:
		id = d.Reject.MsgID
	}
	if !h.isHeld(id) {
		return false, nil
	}
	name, err := s.SetAside(cl)
	if err != nil {
		return false, err
	}
	// The ledger's work is never cut short by a stop (see runSession).
	ok, err := h.l.RecordHeld(context.Background(), HeldAside{File: name, Ino: cl.Ino, Origin: cl.Name, MsgID: id, Consumer: s.ID()})
	if err == nil && ok {
		c.log.Info("held aside: its msg_id is held (spool release DIR --msg-id ID releases it)",
			"file", cl.Name, "held_as", name, "msg_id", id)
		return true, nil
	}
	back, uerr := c.dir.Unhold(name, cl.Name)
	if err != nil || uerr != nil {
		return true, errors.Join(err, uerr)
	}
	c.log.Info("msg_id released as its file was held aside: put back into inbox/", "file", cl.Name, "msg_id", id, "name", back)
	return true, nil
}
