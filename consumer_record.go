package spool

import (
	"context"
	"fmt"
	"time"
)

// The recording stage of a pass without a Caller (see the drawing in
// consumer.go): each batch committed in one ledger transaction, the
// Handler's work in it; on a ledger of concurrent writes, several at once.

// recordAll is the recording stage: it commits each claimed batch once its
// claims are durable and hands it to the finishing stage. After a failure
// it only drains ready, leaving the claims for recovery. It returns how
// many messages the batches claimed.
func (p *pipeline) recordAll() int {
	if p.c.cfg.Caller != nil {
		return p.callAll()
	}
	if k := p.c.recordWrites(); k > 1 {
		return p.recordAhead(k)
	}
	claimed := 0
	for b := range p.ready {
		if p.failed() {
			continue
		}
		claimed += b.claimed
		if err := p.recordBatch(b); err != nil {
			p.fail(err)
			continue
		}
		p.committed(b.items)
	}
	close(p.recorded)
	return claimed
}

// recordBatch commits one claimed batch, once its claims are durable.
func (p *pipeline) recordBatch(b inspected) error {
	if b.err != nil {
		return b.err
	}
	if b.synced != nil {
		if err := <-b.synced; err != nil {
			return err
		}
	}
	return p.c.record(p.work, b.items, p.s.ID())
}

// committed counts the outcomes of a batch its transaction committed and
// hands the batch to the finishing stage, which moves its files out, or
// after a failure of its own leaves them, committed, for recovery.
func (p *pipeline) committed(items []item) {
	for _, it := range items {
		if it.state == examined {
			p.st.add(it.r.Outcome) // committed, whether or not its move succeeds
		}
	}
	p.recorded <- items
}

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
	var w Work // no work: the processed row alone
	if c.cfg.Handler != nil {
		// The consumer decides what a handler's failure makes of a
		// message, by its retry policy; the ledger records the verdict.
		w = Work{Handler: observed{h: c.cfg.Handler, kind: kindOf(c.cfg.Handler), o: c.cfg.Observer},
			Decide: c.cfg.Retry.Decide}
	}
	res, err = c.ledger.Record(ctx, batch, w)
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

// recordWrites is how many record transactions of a plain drain may run at
// once: the ledger's ConcurrentWrites (PostgreSQL, MariaDB), or 1. A
// consumer with a Handler records one batch at a time whatever the
// engine, since the handler's own writes in two transactions at once could
// meet in ways a serial run never shows them.
func (c *Consumer) recordWrites() int {
	if c.working() {
		return 1
	}
	return concurrentWrites(c.ledger)
}

// concurrentWrites is how many write transactions the ledger l says may
// usefully run at once (Ledger.ConcurrentWrites), at least 1 whatever it
// says.
func concurrentWrites(l Ledger) int {
	return max(1, l.ConcurrentWrites())
}

// recording is one batch's record transaction in flight.
type recording struct {
	items []item
	keys  map[string]bool // the msg_ids the transaction may insert
	done  chan struct{}   // closed when the transaction has ended
	err   error           // set before done is closed
}

// recordAhead is the loop of recordAll where the ledger runs k write
// transactions at once (an engine whose transactions lock rows): a batch's
// transaction is several round trips to the server, and with one at a
// time the drain waits on them. Up to k batches are recorded side by side
// and handed to the finishing stage in the order they were claimed.
//
// The outcomes are those of recording the batches one after another: a
// batch starts only once every batch before it that shares one of its
// msg_ids has ended, so the earlier delivery of a msg_id is always the
// one whose row is inserted first (I2: the earlier delivery wins), and a
// batch's duplicates find their owner's row committed. Batches without a
// msg_id in common cannot change each other's outcomes. A batch after one
// that failed is not recorded, and one without a key in common with it
// may have committed already: it is still handed to the finishing stage,
// and what that does not move stays in processing/ for recovery, as after
// a crash between a commit and the moves.
func (p *pipeline) recordAhead(k int) int {
	// At most k transactions at once: k-1 waiting here, and the one whose
	// end the handing loop waits for.
	flights := make(chan *recording, k-1)
	claimed := 0
	go func() {
		defer close(flights)
		var inFlight []*recording
		for b := range p.ready {
			if p.failed() {
				continue
			}
			claimed += b.claimed
			r := &recording{items: b.items, keys: batchKeys(b.items), done: make(chan struct{})}
			inFlight = ended(inFlight)
			if err := waitShared(inFlight, r.keys); err != nil {
				p.fail(err)
				continue
			}
			inFlight = append(inFlight, r)
			flights <- r
			go func() {
				defer close(r.done)
				r.err = p.recordBatch(b)
			}()
		}
	}()
	for r := range flights {
		<-r.done
		if r.err != nil {
			p.fail(r.err)
			continue
		}
		p.committed(r.items)
	}
	close(p.recorded)
	return claimed // written before flights was closed
}

// batchKeys is the set of msg_ids a batch's transaction may insert.
func batchKeys(items []item) map[string]bool {
	keys := make(map[string]bool, len(items))
	for _, it := range items {
		if it.state == examined && it.d.Message != nil {
			keys[it.d.Message.MsgID] = true
		}
	}
	return keys
}

// ended drops from inFlight the transactions that have ended.
func ended(inFlight []*recording) []*recording {
	live := inFlight[:0]
	for _, r := range inFlight {
		select {
		case <-r.done:
		default:
			live = append(live, r)
		}
	}
	return live
}

// waitShared waits for every transaction of inFlight that may insert one of
// keys to end, and returns the first error of those it waited for: a batch
// is not recorded after an earlier one of its msg_ids failed.
func waitShared(inFlight []*recording, keys map[string]bool) error {
	for _, r := range inFlight {
		for id := range r.keys {
			if keys[id] {
				<-r.done
				if r.err != nil {
					return r.err
				}
				break
			}
		}
	}
	return nil
}
