package spool

import (
	"context"
	"fmt"
	"time"
)

// record commits a batch's deliveries in one ledger transaction and keeps
// each one's result in its item. The caller has waited for the batch's
// claims to be durable first (needsSync). With a dedup window, the
// duplicates it knows are absorbed before the transaction, and the
// msg_ids in flight elsewhere held (acquire); the window is told what the
// commit decided once it returns (settleWindow).
func (c *Consumer) record(ctx context.Context, items []item, owner string) (err error) {
	c.acquire(ctx, items, owner)
	batch := make([]*Delivery, 0, len(items))
	for _, it := range items {
		if it.state == examined && !it.absorbed {
			batch = append(batch, it.d)
		}
	}
	if len(batch) == 0 {
		return nil
	}
	defer func() { c.settleWindow(ctx, items, owner, err != nil) }()
	var res []Result
	start := time.Now()
	if c.work != nil {
		// The consumer decides what a handler's failure makes of a
		// message, by its retry policy; the ledger records the verdict.
		w := Work{Handler: c.cfg.Handler, Decide: c.cfg.Retry.Decide}
		if w.Handler != nil {
			w.Handler = observed{h: w.Handler, kind: kindOf(w.Handler), o: c.cfg.Observer}
		}
		res, err = c.work.RecordWork(ctx, batch, w)
	} else {
		res, err = c.ledger.Record(ctx, batch)
	}
	if err != nil {
		return fmt.Errorf("ledger: %w", err) // the ledger names the operation
	}
	c.cfg.Observer.Committed(len(batch), time.Since(start))
	if len(res) != len(batch) {
		return fmt.Errorf("ledger: %d results for a batch of %d", len(res), len(batch))
	}
	k := 0
	for i := range items {
		if items[i].state == examined && !items[i].absorbed {
			items[i].r = res[k]
			k++
		}
	}
	return nil
}
