package spool

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/queue"
)

// record commits a batch's deliveries in one ledger transaction. The caller
// has waited for the batch's claims to be durable first (needsSync).
func (c *Consumer) record(ctx context.Context, items []item) error {
	batch := make([]*Delivery, 0, len(items))
	for _, it := range items {
		if it.state == examined {
			batch = append(batch, it.d)
		}
	}
	if len(batch) == 0 {
		return nil
	}
	var err error
	if c.work != nil {
		err = c.work.RecordWork(ctx, batch, Work{Handler: c.cfg.Handler, Retry: c.cfg.Retry})
	} else {
		err = c.ledger.Record(ctx, batch)
	}
	if err != nil {
		return fmt.Errorf("ledger: %w", err) // the ledger names the operation
	}
	return nil
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
// runs only after record committed the batch.
func (c *Consumer) finish(s *queue.Session, items []item, st *Stats, ms *moveSync) error {
	if err := c.moveOut(s, items, st, ms); err != nil {
		return err
	}
	if c.cfg.Relaxed {
		return nil
	}
	return ms.sync(c.dir, false)
}

// moveOut does finish's renames, holding moves.
func (c *Consumer) moveOut(s *queue.Session, items []item, st *Stats, ms *moveSync) error {
	c.moves.Lock()
	defer c.moves.Unlock()
	for _, it := range items {
		if it.state != examined {
			continue
		}
		if it.d.Outcome == OutcomeRetry {
			st.Retries++
			c.hold(it.claim, it.d.RetryAt)
			c.log.Info("retry scheduled", "file", it.d.File, "msg_id", it.d.Message.MsgID,
				"attempt", it.d.Attempts, "at", it.d.RetryAt, "err", it.d.Err)
			continue
		}
		to := queue.Done
		if it.d.Outcome == OutcomeDeadLetter {
			to, ms.toError = queue.Error, true
		} else {
			ms.toDone = true
		}
		stored, err := s.Finish(it.claim, to)
		if err != nil {
			return err
		}
		st.add(it.d.Outcome)
		if it.d.Outcome == OutcomeDeadLetter {
			c.log.Info("dead letter", "file", it.d.File, "stored", stored, "reason", it.d.Reject.Reason, "detail", it.d.Reject.Error())
		}
		if c.cfg.OnDelivery != nil {
			c.cfg.OnDelivery(it.d, stored)
		}
	}
	return nil
}
