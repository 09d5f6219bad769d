package spool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/spoolq/spool/queue"
)

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
