package spool

import (
	"fmt"
	"time"
)

// The settling stage of a pass with a Caller (see the drawing in
// consumer.go): the finished calls' outcomes committed in groups, then
// handed to the finishing stage.

// settleAll commits the outcomes of finished calls, taking every call that
// has finished by the time the previous commit ends into the next one
// (group commit; one settleAll, or more at once where the engine runs
// write transactions in parallel), gives their slots and order keys back, and passes the
// committed deliveries to handOver: once committed, a call is no longer
// at risk, and the next commit need not wait for the finishing stage.
// After a failure of the pass it only gives back the slots.
func (cs *callStage) settleAll() {
	p := cs.p
	for first := range cs.done {
		group := []called{first}
	more:
		for {
			select {
			case x, ok := <-cs.done:
				if !ok {
					break more
				}
				group = append(group, x)
			default:
				break more
			}
		}
		var items []item
		if !p.failed() {
			var err error
			if items, err = cs.settle(group); err != nil {
				p.fail(err)
			}
		}
		for range group {
			<-cs.slots
		}
		if len(items) == 0 {
			for _, g := range group {
				cs.retire(g.it)
			}
			continue
		}
		for _, g := range group {
			cs.passKey(g.it)
		}
		cs.settled <- items
	}
}

// handOver gives the committed groups to the finishing stage, and counts
// their deliveries out of this stage once it has them.
func (cs *callStage) handOver() {
	for items := range cs.settled {
		cs.p.recorded <- items
		for range items {
			cs.out()
		}
	}
}

// settle commits one group of finished calls and returns their items with
// what the ledger recorded.
func (cs *callStage) settle(group []called) ([]item, error) {
	p, c := cs.p, cs.p.c
	batch := make([]*Delivery, len(group))
	errs := make([]error, len(group))
	for i, g := range group {
		batch[i], errs[i] = g.it.d, g.err
	}
	start := time.Now()
	res, err := c.ledger.Settle(p.work, batch, errs, c.cfg.Retry.Decide)
	if err == nil && len(res) != len(batch) {
		err = fmt.Errorf("%d results for %d calls", len(res), len(batch))
	}
	items := make([]item, len(group))
	for i, g := range group {
		items[i] = g.it
	}
	if err != nil {
		c.settleWindow(p.work, items, p.s.ID(), true)
		return nil, fmt.Errorf("ledger: %w", err)
	}
	c.cfg.Observer.Committed(len(batch), time.Since(start))
	for i := range items {
		items[i].r = res[i]
	}
	c.settleWindow(p.work, items, p.s.ID(), false)
	cs.count(items)
	return items, nil
}

// count adds committed outcomes to the pass's stats.
func (cs *callStage) count(items []item) {
	cs.stMu.Lock()
	defer cs.stMu.Unlock()
	for _, it := range items {
		cs.p.st.add(it.r.Outcome)
	}
}
