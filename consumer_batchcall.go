package spool

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spoolq/spool/queue"
)

// A batch file's records with a Caller (docs/DESIGN.md, "Batch files: the
// consumer"). Each record is a delivery reserved, called and settled as a
// file message is (CallLedger.Reserve and Settle, the calls lock, the
// gate, the lease, the shutdown timeout), in the examining worker that
// consumes the file:
//
//   - the chunks readChunks reads are reserved one at a time, in file
//     order; the reserve records their dead letters (written into error/
//     before it, as without a Caller) and their duplicates;
//   - up to Concurrency calls run at once, each in a goroutine of its
//     own; their outcomes are settled in groups by the file's goroutine,
//     which owns every record's state (callRun), and a dead letter a call
//     decided gets its one-record file after its settle (report);
//   - a record whose call fails retryably is settled as a retry (the
//     ledger counts its attempt and keeps its RetryAt) and reserved and
//     called again when the retry falls due: the file goes on meanwhile,
//     its progress held before the record, and once only retries are
//     left the file is held until the first is due (holdForRetries);
//   - the file's progress passes only records settled for good, the
//     first unsettled one holding it, however the calls finish;
//   - a resumed file's records past the progress that an earlier run
//     settled are found by their claims (settledBefore) and absorbed: not
//     recorded nor called again. A record reserved and not settled when
//     the earlier run died is called again, with its msg_id;
//   - with Config.Ordered the records of one order key are reserved one
//     at a time, in file order: each waits, unreserved, until the one
//     before it of its key is settled for good (processed, duplicate,
//     dead letter), a retry holding the key's later records (keys). A
//     later record of a key is settled only after every earlier one, so
//     a resumed file, which reads again from its first record not
//     settled, calls the earliest unsettled record of each key first.
//     Batch files themselves are then consumed one at a time, in claim
//     order (claimBatch, orderedBatches).

// recordCall is a record of the file from its read to its settle.
type recordCall struct {
	br batchRecord
	// settled: committed as processed, duplicate or dead letter, or
	// absorbed; the progress may pass it.
	settled bool
	// counts are the outcomes of the settled records it stands for in
	// the window: its own, and those of the settled records before it
	// that advance dropped since its position passes theirs. They go
	// into the file's counts with the progress that passes it.
	counts BatchCounts
	// weight is br's when it was read (batchRecord.weight), in
	// callRun.held while it is in the window.
	weight int64
}

// recordDone is what a record's goroutine hands back to the file's.
type recordDone struct {
	rc  *recordCall
	err error // the call's
	// uncalled: the run is stopping, and the call never started;
	// reserved says whether the record's msg_id is reserved for it.
	uncalled, reserved bool
	// cut: the shutdown timeout cut the call short.
	cut bool
}

// callRun is the state of a batch file consumed with a Caller, owned by
// the file's goroutine (batchRun.callAll).
type callRun struct {
	b *batchRun
	p *pipeline
	// window holds the records read and not yet passed by the progress,
	// in file order, a run of settled ones after the first unsettled
	// kept as its last alone (advance): what the progress needs of them
	// is the position after that last one.
	window []*recordCall
	// unsettled counts the records of the window not settled: reserved,
	// called, or waiting to be reserved again (busy, a retry).
	unsettled int
	// held is the weight of the window's records: with unsettled, it
	// bounds what the file holds ahead of its calls (callAll's admit).
	held int64
	// retrying holds the records waiting for their retry to fall due,
	// with when it does.
	retrying map[*recordCall]time.Time
	// inflight counts the goroutines that will hand a record back, on
	// done or again.
	inflight int
	// slots holds a token per call in flight or returned and not yet
	// settled, as callStage.slots does, shared by the batch files
	// consumed at once (Consumer.batchSlots): a kill leaves at most
	// Concurrency calls whose outcome the ledger does not know.
	slots chan struct{}
	done  chan recordDone
	// again carries a record to reserve again: its msg_id was busy, or
	// its retry is due.
	again chan *recordCall
	quit  chan struct{} // closed when callAll returns
	lock  *os.File      // the session's calls lock, for a LockingCaller
	// marked: the file's claim carries the mark of a call started.
	marked bool
	// uncalled are the claims of records reserved and never called (the
	// run is stopping), whose reservations go at the end; cut says a
	// call was cut short by the shutdown timeout.
	uncalled []string
	cut      bool
	// written is when the progress was last written.
	written time.Time
	// keys, with Config.Ordered, holds per order key the records of the
	// window not settled for good, in file order: the first is reserved,
	// called or waiting to be reserved again (busy, a retry), the others
	// wait for it, unreserved. next are the records whose turn came
	// (passKey), to be reserved (reserveNext).
	keys map[string][]*recordCall
	next []*recordCall
}

// progressEvery bounds how often a file consumed with a Caller writes its
// progress, a transaction of its own: a progress behind the records
// settled costs a resumed run a look-up per record it reads again
// (settledBefore), not a call.
const progressEvery = 100 * time.Millisecond

// retryHoldAfter is how far off a batch file's next retry must be for the
// file, read to its end, to be held until then rather than waited for in
// its examining worker (holdForRetries).
const retryHoldAfter = time.Second

// callAll consumes the chunks of the file with the Caller, and then moves
// the file to done/ once every record is settled, gives it back to inbox/
// on a graceful stop, or leaves it claimed, for recovery, when a call was
// cut short.
func (b *batchRun) callAll(ctx context.Context, chunks <-chan batchChunk, stopReading func()) error {
	c, p := b.c, b.c.batchPass
	n := max(1, c.cfg.Concurrency)
	r := &callRun{b: b, p: p, slots: c.batchSlots, done: make(chan recordDone, n),
		again: make(chan *recordCall), quit: make(chan struct{}), written: time.Now(),
		retrying: map[*recordCall]time.Time{}}
	if c.cfg.Ordered {
		r.keys = map[string][]*recordCall{}
	}
	defer close(r.quit)
	// What a pass with a Caller holds ahead of its calls (callAll's
	// admit): records waiting for a retry count, settled ones do not, so
	// the file goes on past a retry until that many wait; and the weight
	// of the window, 2×BatchBytes, so that large records are not held
	// by the hundred (with the chunk read ahead, 3×BatchBytes).
	bound, heavy := n+2*max(1, c.cfg.BatchSize), 2*c.cfg.BatchBytes
	in, last := chunks, false
	// aside is the file's whole failure the reader sent after records
	// (noRoom): the file is set aside once they are settled.
	var aside *BatchRecord
	for in != nil || r.inflight > 0 {
		take := in
		if (r.unsettled >= bound || (r.unsettled > 0 && r.held >= heavy)) && !p.sd.stopped() {
			take = nil // a stopping run reads what the reader sent, to record its dead letters
		}
		if take == nil && r.inflight == 0 {
			break
		}
		if in == nil && r.inflight == len(r.retrying) && len(r.retrying) > 0 {
			// The whole file read, and nothing to do but wait for
			// retries: the file is held as a file message waiting for
			// its retry is (requeueDue, nextDue), so that the examining
			// worker, and the claims of its batch, do not wait for it,
			// and a drain leaves a retry not due within RetryWait for a
			// later run. A retry due within retryHoldAfter is waited
			// for here, cheaper than a resume.
			due, now := r.nextRetry(), time.Now()
			if due.After(now.Add(retryHoldAfter)) || (!c.batchWatch && due.After(now.Add(c.cfg.RetryWait))) {
				return r.holdForRetries(ctx, due)
			}
		}
		var err error
		select {
		case <-p.stop:
			return p.err // the pass failed: the claim and reservations are recovery's
		case ch, ok := <-take:
			switch {
			case !ok:
				in = nil
			case ch.err != nil:
				return ch.err
			case ch.whole != nil && len(r.window) == 0 && r.inflight == 0:
				return b.whole(ctx, *ch.whole)
			case ch.whole != nil:
				aside, in = ch.whole, nil
			default:
				last = ch.last
				err = r.reserve(ctx, r.read(ch.recs))
			}
		case x := <-r.done:
			group := []recordDone{x}
		more:
			for {
				select {
				case x := <-r.done:
					group = append(group, x)
				default:
					break more
				}
			}
			err = r.settle(ctx, group)
		case rc := <-r.again:
			// With the others due by now: one reserve for them all.
			rcs := []*recordCall{rc}
		again:
			for {
				select {
				case rc := <-r.again:
					rcs = append(rcs, rc)
				default:
					break again
				}
			}
			r.inflight -= len(rcs)
			for _, rc := range rcs {
				delete(r.retrying, rc)
			}
			err = r.reserve(ctx, rcs)
		}
		if err == nil {
			err = r.reserveNext(ctx)
		}
		if err == nil {
			err = r.advance(ctx, false)
		}
		if err != nil {
			return err
		}
	}
	stopReading()
	if r.cut {
		// As a kill leaves it: the claim with its mark, the msg_ids
		// reserved, until recovery knows the calls cannot be running.
		c.log.Info("stopping: batch file left for recovery with calls cut short", "file", b.cl.Name, "position", b.p.Position)
		return nil
	}
	if err := r.release(ctx); err != nil {
		return err
	}
	if r.marked {
		if err := b.s.ClearCalled(b.cl); err != nil {
			return err
		}
	}
	// The progress passes the last records settled, with their counts,
	// before the file moves on (done/, or back to inbox/).
	if err := r.advance(ctx, true); err != nil {
		return err
	}
	switch {
	case last && len(r.window) == 0:
		return b.finish(queue.Done)
	case aside != nil && len(r.window) == 0:
		return b.whole(ctx, *aside)
	}
	return b.giveBack()
}

// nextRetry is when the first of the records waiting for a retry falls
// due.
func (r *callRun) nextRetry() time.Time {
	var next time.Time
	for _, due := range r.retrying {
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	return next
}

// holdForRetries ends the consumption of a file read to its end whose
// records left to call all wait for their retries: its progress is
// written, and the file held with its done-file (waiting) until the first
// retry is due, when it goes back to inbox/ (or as a drain ends, for a
// retry not due within RetryWait); the claim that takes it again resumes
// it at its progress, absorbing the records settled, and holds each
// record until its retry is due. No call of the file is in flight.
func (r *callRun) holdForRetries(ctx context.Context, due time.Time) error {
	b, c := r.b, r.b.c
	if r.marked {
		if err := b.s.ClearCalled(b.cl); err != nil {
			return err
		}
	}
	if err := r.advance(ctx, true); err != nil {
		return err
	}
	c.mu.Lock()
	c.waiting = append(c.waiting, waiting{claim: b.cl, due: due, done: b.done})
	c.mu.Unlock()
	msg := "batch file held for its records' retries"
	if c.orderedBatches() {
		msg += "; the other batch files wait for it (ordered)"
	}
	c.log.Info(msg, "file", b.cl.Name, "position", b.p.Position, "records", len(r.retrying), "at", due)
	return nil
}

// read puts a chunk's records into the window, and returns those to
// reserve: all but the ones absorbed, and, with Config.Ordered, those
// whose order key has an earlier record not settled (keys).
func (r *callRun) read(recs []batchRecord) []*recordCall {
	var out []*recordCall
	for _, br := range recs {
		rc := &recordCall{br: br, settled: br.absorbed, weight: br.weight()}
		r.window = append(r.window, rc)
		r.held += rc.weight
		if br.absorbed {
			rc.counts.add(br.absorbedAs)
			continue
		}
		r.unsettled++
		if key, ok := r.orderKey(rc); ok {
			r.keys[key] = append(r.keys[key], rc)
			if len(r.keys[key]) > 1 {
				continue // its turn comes when the one before is settled
			}
		}
		out = append(out, rc)
	}
	return out
}

// orderKey returns the record's order key, with Config.Ordered, when it
// has one: a record rejected has none, and is not ordered.
func (r *callRun) orderKey(rc *recordCall) (string, bool) {
	if r.keys == nil || rc.br.d.Message == nil || rc.br.d.Message.OrderNo == "" {
		return "", false
	}
	return rc.br.d.Message.OrderNo, true
}

// settledAs marks rc settled for good as o, and, with Config.Ordered,
// gives its order key to the next record of it (passKey).
func (r *callRun) settledAs(rc *recordCall, o Outcome) {
	rc.settled = true
	rc.counts.add(o)
	r.unsettled--
	r.passKey(rc)
}

// passKey gives the order key of rc, settled for good, to the key's next
// record in file order, which reserveNext reserves. A retry does not
// pass it: the key's later records wait for the retry, as they wait for a
// call, so that none overtakes it; a dead letter does, as it does for
// file messages (callStage.passKey).
func (r *callRun) passKey(rc *recordCall) {
	key, ok := r.orderKey(rc)
	if !ok {
		return
	}
	w := r.keys[key]
	i := slices.Index(w, rc) // 0: only a key's first record is reserved
	if i < 0 {
		return
	}
	if len(w) == 1 {
		delete(r.keys, key)
		return
	}
	r.keys[key] = slices.Delete(w, i, i+1)
	if i == 0 {
		r.next = append(r.next, r.keys[key][0])
	}
}

// reserveNext reserves the records whose order key came to them, and
// those whose key their own reserve passed on (a duplicate, a dead
// letter), until none is left. A stopping run reserves none: they stay
// unsettled, before the progress, for the next run.
func (r *callRun) reserveNext(ctx context.Context) error {
	for len(r.next) > 0 && !r.p.sd.stopped() {
		rcs := r.next
		r.next = nil
		if err := r.reserve(ctx, rcs); err != nil {
			return err
		}
	}
	return nil
}

// reserve reserves the msg_ids of rcs, in one transaction that records
// their dead letters and duplicates, and starts the calls of those
// reserved. A record whose msg_id another delivery has reserved is
// reserved again shortly (reservationRecheck); one whose retry is not due
// yet (the ledger's schedule, after a restart) when it is.
func (r *callRun) reserve(ctx context.Context, rcs []*recordCall) error {
	b, c := r.b, r.b.c
	var batch []*Delivery
	var which []*recordCall
	now := time.Now()
	for _, rc := range rcs {
		if m := rc.br.d.Message; m != nil {
			if due, ok := c.dueAt(m.MsgID); ok && due.After(now) {
				r.retrying[rc] = due
				r.later(rc, due)
				continue
			}
		}
		batch = append(batch, rc.br.d)
		which = append(which, rc)
	}
	if len(batch) == 0 {
		return nil
	}
	start := time.Now()
	res, err := c.ledger.Reserve(ctx, batch, c.callOwner(b.s.ID()))
	if err == nil && len(res) != len(batch) {
		err = fmt.Errorf("%d reservations for a batch of %d", len(res), len(batch))
	}
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	c.cfg.Observer.Committed(len(batch), time.Since(start))
	for k, x := range res {
		rc := which[k]
		switch x.Outcome {
		case OutcomeReserved:
			if err := r.start(rc); err != nil {
				return err
			}
		case OutcomeBusy:
			r.later(rc, time.Now().Add(reservationRecheck))
		default:
			r.settledAs(rc, x.Outcome)
			if err := b.report(ctx, rc.br, x); err != nil {
				return err
			}
		}
	}
	return nil
}

// later reserves rc again at the time at, unless the run stops first: it
// is then handed back uncalled, unreserved.
func (r *callRun) later(rc *recordCall, at time.Time) {
	p := r.p
	r.inflight++
	go func() {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.sd.ctx.Done():
			r.send(recordDone{rc: rc, uncalled: true})
			return
		case <-r.quit:
			return
		}
		select {
		case r.again <- rc:
		case <-r.quit:
		}
	}()
}

// start calls a reserved record in a goroutine of its own, once a slot is
// free, after the operator's pause, the gate and the lease (awaitCall, as
// callStage.start does); the file's claim is marked as called first, and
// the calls lock taken (callStage.delivery).
func (r *callRun) start(rc *recordCall) error {
	p, c := r.p, r.p.c
	if !r.marked {
		if holdsCallsLock(c.cfg.Caller) {
			f, err := p.s.CallsLock()
			if err != nil {
				return err
			}
			r.lock = f
		}
		if err := p.s.MarkCalled(r.b.cl); err != nil {
			return err
		}
		r.marked = true
	}
	r.inflight++
	go func() {
		switch p.awaitCall(r.slots) {
		case callLeave:
			return
		case callGiveBack:
			r.send(recordDone{rc: rc, uncalled: true, reserved: true})
			return
		}
		d := rc.br.d
		if r.lock != nil {
			cp := *d
			cp.CallsLock = r.lock
			d = &cp
		}
		start := time.Now()
		err := callSafely(p.sd.callCtx, c.cfg.Caller, d)
		if p.sd.abandoned(err) {
			p.sd.cancelled.Add(1)
			<-r.slots
			r.send(recordDone{rc: rc, cut: true})
			return
		}
		c.cfg.Observer.Called(kindOf(c.cfg.Caller), callResult(err), time.Since(start))
		c.gate.observe(err)
		r.send(recordDone{rc: rc, err: err}) // its slot is given back once settled
	}()
	return nil
}

// send hands a record back to the file's goroutine, unless it returned.
func (r *callRun) send(x recordDone) {
	select {
	case r.done <- x:
	case <-r.quit:
	}
}

// settle commits the outcomes of a group of returned calls in one
// transaction (CallLedger.Settle, with the retry policy), gives their
// slots back, and reports them; a retry is reserved again when due.
func (r *callRun) settle(ctx context.Context, group []recordDone) error {
	b, c := r.b, r.b.c
	var calls []recordDone
	for _, g := range group {
		r.inflight--
		switch {
		case g.cut:
			r.cut = true
		case g.uncalled:
			delete(r.retrying, g.rc)
			if g.reserved {
				r.uncalled = append(r.uncalled, g.rc.br.d.Claim)
			}
		default:
			calls = append(calls, g)
		}
	}
	if len(calls) == 0 {
		return nil
	}
	batch := make([]*Delivery, len(calls))
	errs := make([]error, len(calls))
	for i, g := range calls {
		batch[i], errs[i] = g.rc.br.d, g.err
	}
	start := time.Now()
	res, err := c.ledger.Settle(ctx, batch, errs, c.cfg.Retry.Decide)
	if err == nil && len(res) != len(batch) {
		err = fmt.Errorf("%d results for %d calls", len(res), len(batch))
	}
	for range calls {
		<-r.slots
	}
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	c.cfg.Observer.Committed(len(batch), time.Since(start))
	for i, x := range res {
		rc := calls[i].rc
		if err := b.report(ctx, rc.br, x); err != nil {
			return err
		}
		if x.Outcome == OutcomeRetry {
			r.retrying[rc] = x.RetryAt
			r.later(rc, x.RetryAt)
			continue
		}
		r.settledAs(rc, x.Outcome)
	}
	return nil
}

// advance drops the settled records at the head of the window, keeps of
// each later run of settled records its last, and, at most every
// progressEvery unless now, writes the position after the last record
// dropped as the file's progress.
func (r *callRun) advance(ctx context.Context, now bool) error {
	b := r.b
	i := 0
	for i < len(r.window) && r.window[i].settled {
		b.p.Position = r.window[i].br.rec.After
		b.p.Passed.addAll(r.window[i].counts)
		r.held -= r.window[i].weight
		i++
	}
	kept := r.window[:0]
	for k := i; k < len(r.window); k++ {
		if rc := r.window[k]; rc.settled && k+1 < len(r.window) && r.window[k+1].settled {
			r.window[k+1].counts.addAll(rc.counts)
			r.held -= rc.weight
			continue // the next one's position passes it
		}
		kept = append(kept, r.window[k])
	}
	clear(r.window[len(kept):])
	r.window = kept
	if !now && time.Since(r.written) < progressEvery {
		return nil
	}
	r.written = time.Now()
	if _, err := b.c.ledger.RecordBatch(ctx, nil, Work{}, b.p); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	b.p.Passed = BatchCounts{} // in the file's counts now
	return nil
}

// release removes the reservations of the records reserved and never
// called, once no call of the file is in flight.
func (r *callRun) release(ctx context.Context) error {
	if len(r.uncalled) == 0 {
		return nil
	}
	b, c := r.b, r.b.c
	if _, err := c.ledger.ReleaseClaims(ctx, b.s.ID(), r.uncalled); err != nil {
		return fmt.Errorf("give back records not called: %w", err)
	}
	return nil
}

// settledBefore reports whether a record of a resumed file was settled for
// good by an earlier run, with a Caller, past the progress it wrote: its
// claim is recorded as processed (found through its msg_id's processed
// row), duplicate or dead letter. A retry is not: the record is called
// again when due.
func (b *batchRun) settledBefore(ctx context.Context, d *Delivery, rej *RejectError) (Outcome, bool, error) {
	msgID := ""
	if rej == nil && d.Message != nil {
		msgID = d.Message.MsgID
	}
	o, found, err := b.c.ledger.ClaimOutcome(ctx, d.Claim, msgID)
	if err != nil {
		return "", false, fmt.Errorf("ledger: %w", err)
	}
	return o, found && o != OutcomeRetry, nil
}
