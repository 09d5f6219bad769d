package spool

import (
	"fmt"
	"sync"
	"time"
)

// called is a reserved delivery whose call has returned.
type called struct {
	it  item
	err error
}

// calls is the recording stage of a pass with a Caller: it reserves each
// batch's msg_ids in one short transaction, makes up to Concurrency calls
// at once outside any transaction, and commits their outcomes in short
// group commits (settleAll). No ledger transaction is open during a call,
// so a slow downstream holds no lock of the ledger (SQLite's write lock
// above all) and several consumers of one ledger call at once.
type calls struct {
	p *pipeline
	// slots holds a token per call in flight or finished and not yet
	// settled: at most Concurrency. A slot is given back only once its
	// outcome is committed, so a consumer killed at any instant leaves at
	// most Concurrency calls whose outcome is unknown to the ledger: the
	// calls that a recovery makes again.
	slots    chan struct{}
	done     chan called
	inflight sync.WaitGroup
	stMu     sync.Mutex // p.st, written by callAll and settleAll
}

// callAll is recordAll for a consumer with a Caller. It returns how many
// messages the batches claimed.
func (p *pipeline) callAll() int {
	n := p.c.cfg.Concurrency
	cs := &calls{p: p, slots: make(chan struct{}, n), done: make(chan called, n)}
	var settler sync.WaitGroup
	settler.Add(1)
	go func() {
		defer settler.Done()
		cs.settleAll()
	}()
	claimed := 0
	for b := range p.ready {
		if p.failed() {
			continue
		}
		claimed += b.claimed
		err := b.err
		if err == nil && b.synced != nil {
			err = <-b.synced
		}
		if err == nil {
			err = cs.reserve(b.items)
		}
		if err != nil {
			p.fail(err)
		}
	}
	cs.inflight.Wait()
	close(cs.done)
	settler.Wait()
	close(p.recorded)
	return claimed
}

// reserve reserves the msg_ids of a batch and starts the call of each
// delivery it reserved, as slots free up. The batch's dead letters and
// duplicates are recorded by the same commit and go straight on to be moved
// out; a delivery whose msg_id is reserved for another delivery in flight
// is held in processing/ and presented again shortly (reservationRecheck),
// until that one's outcome is committed: it is then a duplicate, or, if
// the other failed (a retry is scheduled, or it was dead-lettered), it is
// called itself.
func (cs *calls) reserve(items []item) error {
	p, c := cs.p, cs.p.c
	var batch []*Delivery
	var idx []int
	for i, it := range items {
		if it.state == examined {
			batch = append(batch, it.d)
			idx = append(idx, i)
		}
	}
	if len(batch) == 0 {
		return nil
	}
	res, err := c.calls.Reserve(p.work, batch, p.s.ID())
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	if len(res) != len(batch) {
		return fmt.Errorf("ledger: %d reservations for a batch of %d", len(res), len(batch))
	}
	var finished, toCall []item
	for k, r := range res {
		it := items[idx[k]]
		switch r.Outcome {
		case OutcomeReserved:
			toCall = append(toCall, it)
		case OutcomeBusy:
			c.hold(it.claim, time.Now().Add(reservationRecheck))
		default:
			it.r = r
			finished = append(finished, it)
		}
	}
	if len(finished) > 0 {
		cs.count(finished)
		p.recorded <- finished
	}
	for _, it := range toCall {
		select {
		case cs.slots <- struct{}{}:
		case <-p.stop:
			// The pass failed: the remaining reserved claims stay in
			// processing/ uncalled, for recovery, which also releases
			// their reservations once this session is gone.
			return nil
		}
		cs.inflight.Add(1)
		go func() {
			defer cs.inflight.Done()
			// The work context: a call started is finished, even when
			// Watch is shutting down.
			cs.done <- called{it: it, err: callSafely(p.work, c.cfg.Caller, it.d)}
		}()
	}
	return nil
}

// settleAll commits the outcomes of finished calls, taking every call that
// has finished by the time the previous commit ends into the next one
// (group commit), gives their slots back, and hands the committed
// deliveries to the finishing stage. The slots are given back before the
// hand-over: once committed, a call is no longer at risk, and the
// finishing stage may be waiting for the claiming one (moves). After a
// failure of the pass it only gives back the slots.
func (cs *calls) settleAll() {
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
		if len(items) > 0 {
			p.recorded <- items
		}
	}
}

// settle commits one group of finished calls and returns their items with
// what the ledger recorded.
func (cs *calls) settle(group []called) ([]item, error) {
	p, c := cs.p, cs.p.c
	batch := make([]*Delivery, len(group))
	errs := make([]error, len(group))
	for i, g := range group {
		batch[i], errs[i] = g.it.d, g.err
	}
	res, err := c.calls.Settle(p.work, batch, errs, c.cfg.Retry.Decide)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if len(res) != len(batch) {
		return nil, fmt.Errorf("ledger: %d results for %d calls", len(res), len(batch))
	}
	items := make([]item, len(group))
	for i, g := range group {
		items[i] = g.it
		items[i].r = res[i]
	}
	cs.count(items)
	return items, nil
}

// count adds committed outcomes to the pass's stats.
func (cs *calls) count(items []item) {
	cs.stMu.Lock()
	defer cs.stMu.Unlock()
	for _, it := range items {
		cs.p.st.add(it.r.Outcome)
	}
}
