package spool

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Window is a dedup window in front of the ledger's duplicate check: a
// fast store shared by every consumer of a queue (package window keeps one
// in Redis) that remembers, for a while, the msg_ids the ledger committed
// and those being recorded or called right now. The ledger stays the
// truth: a msg_id the window calls done has its processed row committed
// (Done is only ever told after the commit), and anything the window does
// not know, or cannot answer, goes to the ledger as without a window.
//
// Every method may fail (the store is down or slow): the consumer then
// goes on with the ledger alone, so a Window never stops consumption, and
// it never admits a second row or a second call, which the ledger refuses
// by itself. Methods must be safe for concurrent use.
type Window interface {
	// Acquire takes each key for owner while it is in flight, for a short
	// time, unless it is taken already, and returns the state of each key
	// in order: WindowAcquired (taken now, or held by owner already),
	// WindowDone with the content hash the ledger processed, or
	// WindowBusy (in flight for another owner).
	Acquire(ctx context.Context, msgIDs []string, owner string) ([]WindowEntry, error)
	// Done marks each msg_id as processed in the ledger with its content
	// hash, for the window's time: it must be called only once the
	// ledger's commit of that msg_id's processed row has returned.
	Done(ctx context.Context, msgIDs, hashes []string) error
	// Release deletes the keys that owner still holds in flight (compare
	// and delete): a key marked done or taken by another owner since is
	// left alone.
	Release(ctx context.Context, msgIDs []string, owner string) error
}

// WindowState is what a Window knows of a msg_id.
type WindowState uint8

const (
	// WindowAcquired: the caller holds the msg_id in flight now; the
	// ledger decides what it is.
	WindowAcquired WindowState = iota
	// WindowDone: the ledger committed the msg_id's processed row, with
	// content hash WindowEntry.Hash.
	WindowDone
	// WindowBusy: another owner holds the msg_id in flight (being recorded
	// or called): its outcome is shortly committed, or its hold expires.
	WindowBusy
)

// WindowEntry is one msg_id's state in a Window, with the processed
// content hash of a WindowDone one.
type WindowEntry struct {
	State WindowState
	Hash  string
}

// windowRetry is how long the consumer leaves a failed Window alone
// before it asks it again: an outage costs one failed request a second,
// not one per batch.
const windowRetry = time.Second

// windowGuard is the consumer's use of its Window: it turns the window's
// failures into ledger-only consumption, says so once per outage (and
// once when the window answers again), counts each failure
// (Observer.WindowFailed), and asks a failed window again no sooner than
// windowRetry.
type windowGuard struct {
	w   Window
	log *slog.Logger
	obs Observer

	mu      sync.Mutex
	down    bool
	retryAt time.Time
}

// newWindowGuard returns the guard of w; nil when w is nil.
func newWindowGuard(w Window, log *slog.Logger, obs Observer) *windowGuard {
	if w == nil {
		return nil
	}
	return &windowGuard{w: w, log: log, obs: obs}
}

// usable reports whether the window may be asked now.
func (g *windowGuard) usable() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.down || !time.Now().Before(g.retryAt)
}

// result records the outcome of one request to the window.
func (g *windowGuard) result(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		if g.down {
			g.down = false
			g.log.Info("dedup window answers again: duplicates are absorbed in it again")
		}
		return
	}
	g.obs.WindowFailed()
	g.retryAt = time.Now().Add(windowRetry)
	if !g.down {
		g.down = true
		g.log.Warn("dedup window unavailable: consuming with the ledger alone, which still refuses every second row and call; asked again every second",
			"err", err)
	}
}

// windowCtx bounds one request to the window: a window that does not
// answer at once is as good as down. A stopping run still tells the
// window what it committed.
func windowCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
}

// acquire asks the window about the examined, valid deliveries of items,
// for the session owner. A delivery the window knows as done with the
// same content is absorbed: its item gets OutcomeDuplicate and absorbed
// is set, and the ledger is not asked about it. One in flight for another
// owner is held (holdBusy) and its item set to held. The others go to the
// ledger; those the window gave this owner are marked acquired. With no
// window, or a window that fails, nothing changes.
func (c *Consumer) acquire(ctx context.Context, items []item, owner string) {
	g := c.win
	if g == nil || !g.usable() {
		return
	}
	var ids []string
	var idx []int
	for i, it := range items {
		if it.state == examined && it.d.Reject == nil && it.d.Message != nil {
			ids = append(ids, it.d.Message.MsgID)
			idx = append(idx, i)
		}
	}
	if len(ids) == 0 {
		return
	}
	wctx, cancel := windowCtx(ctx)
	defer cancel()
	st, err := g.w.Acquire(wctx, ids, owner)
	if err == nil && len(st) != len(ids) {
		err = errWindowAnswer
	}
	g.result(err)
	if err != nil {
		return
	}
	n := 0
	for k, e := range st {
		it := &items[idx[k]]
		switch {
		case e.State == WindowAcquired:
			it.acquired = true
		case e.State == WindowDone && e.Hash == it.d.Hash:
			it.r = Result{Outcome: OutcomeDuplicate}
			it.absorbed = true
			n++
		case e.State == WindowBusy:
			c.holdBusy(it.claim)
			it.state = held
		}
		// WindowDone with another content: the ledger records the
		// conflict.
	}
	if n > 0 {
		c.cfg.Observer.WindowAbsorbed(n)
	}
}

// settleWindow tells the window what the ledger committed for items whose
// outcome is final: done for a processed msg_id and for a duplicate of
// the same content, and a release of every other key this owner acquired.
// Items still in flight (reserved, to be called) are left as they are.
// With failed set, the ledger committed nothing: every acquired key is
// released.
func (c *Consumer) settleWindow(ctx context.Context, items []item, owner string, failed bool) {
	g := c.win
	if g == nil {
		return
	}
	var doneIDs, hashes, release []string
	for _, it := range items {
		if !it.acquired || it.state != examined {
			continue
		}
		switch {
		case failed:
			release = append(release, it.d.Message.MsgID)
		case it.r.Outcome == OutcomeProcessed, it.r.Outcome == OutcomeDuplicate && !it.r.Conflict:
			doneIDs = append(doneIDs, it.d.Message.MsgID)
			hashes = append(hashes, it.d.Hash)
		case it.r.Outcome == OutcomeReserved, it.r.Outcome == OutcomeBusy:
			// In flight, here (settled after its call) or for another
			// delivery (whose key this is, or expires by itself).
		default:
			release = append(release, it.d.Message.MsgID)
		}
	}
	if len(doneIDs)+len(release) == 0 || !g.usable() {
		return // keys not told expire with their hold
	}
	wctx, cancel := windowCtx(ctx)
	defer cancel()
	var err error
	if len(doneIDs) > 0 {
		err = g.w.Done(wctx, doneIDs, hashes)
	}
	if err == nil && len(release) > 0 {
		err = g.w.Release(wctx, release, owner)
	}
	g.result(err)
}

// errWindowAnswer is a window's answer of the wrong length.
var errWindowAnswer = windowError("dedup window: answer does not match the request")

type windowError string

func (e windowError) Error() string { return string(e) }
