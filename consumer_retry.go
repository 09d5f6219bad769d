package spool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/queue"
)

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
	if c.work == nil {
		return nil
	}
	sched, err := c.work.RetrySchedule(ctx)
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
