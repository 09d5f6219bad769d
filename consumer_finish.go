package spool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/spoolq/spool/queue"
)

// The finishing stage of a pass (see the drawing in consumer.go): the
// committed files moved out of processing/ and the moves synced, and the
// claims held in processing/ until their retry is due.

// finishAll is the finishing stage: it moves the files of each committed
// batch out of processing/, syncing the moves now and then and once more
// at the end (moveSync).
func (p *pipeline) finishAll() {
	ms := moveSync{last: time.Now()}
	for items := range p.recorded {
		if err := p.c.finish(p.s, p.lease, p.stop, items, &ms); err != nil {
			p.fail(err)
			for range p.recorded {
			}
			return
		}
	}
	if !p.c.cfg.Relaxed {
		if err := ms.sync(p.c.dir, true); err != nil {
			p.fail(err)
		}
	}
}

// moveSyncInterval is how often the moves out of processing/ are made
// durable while a pass runs; a pass also syncs them when it ends.
//
// Why not after every batch, as the claims and the ledger commit are: a
// move lost to a power cut leaves its file in the session directory, where
// recovery finds it and asks the ledger, which committed its outcome before
// the move (I3, I4), so the file is finished the same way. A sync per batch
// bought nothing but one more journal commit per batch (on ext4, a
// directory fsync commits the whole journal); once a second bounds what a
// power cut sends back through recovery.
const moveSyncInterval = time.Second

// moveSync remembers which stages received files since they were last
// synced, for the finishing stage of a pass.
type moveSync struct {
	last            time.Time
	toDone, toError bool
}

// sync makes the moves durable if force is set or the interval has passed.
func (m *moveSync) sync(d *queue.Dir, force bool) error {
	if !force && time.Since(m.last) < moveSyncInterval {
		return nil
	}
	var stages []queue.Stage
	if m.toDone {
		stages = append(stages, queue.Done)
	}
	if m.toError {
		stages = append(stages, queue.Error)
	}
	m.last, m.toDone, m.toError = time.Now(), false, false
	return d.Sync(stages...)
}

// finish moves the files of a recorded batch to done/ or error/. I3/I4: it
// runs only after record committed the batch. It first waits for the
// session's lease to hold: a session whose lease may have lapsed may have
// had its claims taken over, whose recovery moves them itself (to the
// same stages: the outcomes were committed), and a session whose lease was
// taken over moves nothing more (ErrLeaseLost fails the pass).
func (c *Consumer) finish(s *queue.Session, lease *leaseKeeper, stop <-chan struct{}, items []item, ms *moveSync) error {
	if err := lease.wait(context.Background(), stop); err != nil {
		return err
	}
	if err := c.moveOut(s, items, ms); err != nil {
		return err
	}
	if c.cfg.Relaxed {
		return nil
	}
	return ms.sync(c.dir, false)
}

// moveOut does finish's renames, holding moves. A delivery whose retry was
// scheduled is held in processing/ instead, until it is due.
func (c *Consumer) moveOut(s *queue.Session, items []item, ms *moveSync) error {
	c.moves.Lock()
	defer c.moves.Unlock()
	for _, it := range items {
		if it.state != examined {
			continue
		}
		d, r := it.d, it.r
		if it.called {
			// Committed: the reservation is gone, and the mark with it.
			if err := s.ClearCalled(it.claim); err != nil {
				return err
			}
		}
		if r.Outcome == OutcomeRetry {
			c.hold(it.claim, r.RetryAt)
			c.log.Info("retry scheduled", append([]any{"file", d.File, "msg_id", d.Message.MsgID,
				"attempt", r.Attempts, "at", r.RetryAt, "err", r.Err}, d.Message.Headers.LogArgs()...)...)
			c.cfg.Observer.Delivered(d, r)
			continue
		}
		to := queue.Done
		if r.Outcome == OutcomeDeadLetter {
			to, ms.toError = queue.Error, true
		} else {
			ms.toDone = true
		}
		stored, err := s.Finish(it.claim, to)
		if errors.Is(err, fs.ErrNotExist) {
			// Gone from the session's own directory: only a recovery that
			// took this session's lease over moves a claim out of it.
			return fmt.Errorf("%w: %w", ErrLeaseLost, err)
		}
		if err != nil {
			return err
		}
		if r.Outcome == OutcomeDeadLetter {
			c.log.Info("dead letter", "file", d.File, "stored", stored, "reason", r.Reject.Reason, "detail", c.logDetail(r.Reject))
		}
		c.cfg.Observer.Delivered(d, r)
		if c.cfg.OnDelivery != nil {
			c.cfg.OnDelivery(d, r, stored)
		}
	}
	return nil
}

// waiting is a claim held until its next attempt is due. It stays in the
// session's directory, invisible to other consumers and blocking nobody;
// when due it goes back to inbox/ to be claimed again. If the consumer dies
// meanwhile, recovery puts it back (its claim was never recorded) and the
// ledger still holds its attempt count.
type waiting struct {
	claim *queue.Claim
	due   time.Time
	// busy: held while another delivery of its msg_id is being called
	// (OutcomeBusy), not for a retry; a drain always waits for it.
	busy bool
	// done is the done-file claimed with a batch file held for its
	// records' retries (consumer_batchcall.go), which goes back to inbox/
	// just before it, as giveBack moves them.
	done *queue.Claim
}

// requeueDue moves the waiting claims that are due, or all of them, back to
// inbox/.
func (c *Consumer) requeueDue(s *queue.Session, all bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	keep := c.waiting[:0]
	var errs []error
	for _, w := range c.waiting {
		if !all && w.due.After(now) {
			keep = append(keep, w)
			continue
		}
		if w.done != nil {
			if _, err := s.Finish(w.done, queue.Inbox); err != nil {
				errs = append(errs, err)
				keep = append(keep, w)
				continue
			}
			w.done = nil
		}
		if _, err := s.Finish(w.claim, queue.Inbox); err != nil {
			errs = append(errs, err)
			keep = append(keep, w)
		}
	}
	c.waiting = keep
	if len(errs) > 0 {
		return fmt.Errorf("requeue waiting claims: %w", errors.Join(errs...))
	}
	return nil
}

// nextDue returns the earliest due time of the waiting claims a run waits
// for: all of them in a watch; in a drain, the claims held for another
// delivery's call and the retries due within Config.RetryWait only, so that
// a retry due in an hour does not hold a cron-driven drain an hour (the
// others go back to inbox/ at close, their schedule kept in the ledger).
func (c *Consumer) nextDue(watch bool) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	found := false
	limit := time.Now().Add(c.cfg.RetryWait)
	for _, w := range c.waiting {
		if !watch && !w.busy && w.due.After(limit) {
			continue
		}
		if !found || w.due.Before(next) {
			next, found = w.due, true
		}
	}
	return next, found
}

// deferred counts the retries waiting, and the earliest of them, for the
// Stats of a drain that leaves them for a later run.
func (c *Consumer) deferred() (int, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	var next time.Time
	for _, w := range c.waiting {
		if w.busy {
			continue
		}
		if n == 0 || w.due.Before(next) {
			next = w.due
		}
		n++
	}
	return n, next
}

// isWaiting reports whether a claim of that name waits for its retry.
func (c *Consumer) isWaiting(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiting {
		if w.claim.Name == name {
			return true
		}
	}
	return false
}

// batchHeld reports whether, with orderedBatches, a batch file waits for
// its records' retries (callRun.holdForRetries): the other batch files
// then wait in inbox/ for it (claimBatch).
func (c *Consumer) batchHeld() bool {
	if !c.orderedBatches() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiting {
		if c.isBatch(w.claim) {
			return true
		}
	}
	return false
}

// hold keeps a claim until its retry is due.
func (c *Consumer) hold(cl *queue.Claim, due time.Time) {
	c.mu.Lock()
	c.waiting = append(c.waiting, waiting{claim: cl, due: due})
	c.mu.Unlock()
}

// holdBusy keeps a claim whose msg_id another delivery is being called
// for, until it is looked at again.
func (c *Consumer) holdBusy(cl *queue.Claim) {
	c.mu.Lock()
	c.waiting = append(c.waiting, waiting{claim: cl, due: time.Now().Add(reservationRecheck), busy: true})
	c.mu.Unlock()
}

// loadSchedule reads the ledger's retry schedule, so that a message claimed
// before its retry is due (after a restart, or from another consumer) is
// held rather than tried early.
func (c *Consumer) loadSchedule(ctx context.Context) error {
	if !c.working() {
		return nil
	}
	sched, err := c.ledger.RetrySchedule(ctx)
	if err != nil {
		return fmt.Errorf("load retry schedule: %w", err)
	}
	c.mu.Lock()
	c.schedule = sched
	c.mu.Unlock()
	return nil
}

// dueAt returns when a msg_id may next be tried, if it waits for a retry.
func (c *Consumer) dueAt(msgID string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.schedule[msgID]
	return t, ok
}
