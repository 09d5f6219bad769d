package spool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/spoolq/spool/queue"
	"golang.org/x/time/rate"
)

// The recording stage of a pass with a Caller (see the drawing in
// consumer.go): the msg_ids reserved, the calls admitted, paced (gate) and
// made outside any transaction; what a stopping run does not call is given
// back. Their outcomes are committed by the settling stage
// (consumer_settle.go).

// called is a reserved delivery whose call has returned.
type called struct {
	it  item
	err error
}

// callStage is the recording stage of a pass with a Caller: it reserves each
// batch's msg_ids in one short transaction, makes up to Concurrency calls
// at once outside any transaction, and commits their outcomes in short
// group commits (settleAll). No ledger transaction is open during a call,
// so a slow downstream holds no lock of the ledger (SQLite's write lock
// above all) and several consumers of one ledger call at once.
type callStage struct {
	p *pipeline
	// slots holds a token per call in flight or finished and not yet
	// settled: at most Concurrency. A slot is given back only once its
	// outcome is committed, so a consumer killed at any instant leaves at
	// most Concurrency calls whose outcome is unknown to the ledger: the
	// calls that a recovery makes again.
	slots chan struct{}
	// admitted holds a token per reserved delivery not yet settled,
	// waiting for its key or a slot, or called: it bounds what a pass
	// reserves ahead of its calls (the claiming stage waits on it).
	admitted chan struct{}
	done     chan called
	// settled carries the committed groups from settleAll to handOver,
	// which gives them to the finishing stage: the next commit does not
	// wait for that stage, which waits its turn for the moves while the
	// claiming stage renames a batch, and calls that finish meanwhile
	// would hold their slots. Never full: each item in it holds an
	// admitted token, and it has room for as many groups.
	settled chan []item
	// inflight counts the reserved deliveries not yet settled and handed
	// over: callAll waits for it before it closes done.
	inflight sync.WaitGroup
	stMu     sync.Mutex // p.st, written by callAll and settleAll

	// With Config.Ordered: the order keys with a call in flight (or
	// settling), and the claimed deliveries of each waiting their turn,
	// in seq order.
	keyMu   sync.Mutex
	keyBusy map[string]bool
	keyWait map[string][]item

	// back are the reserved deliveries a stopping run will not call, their
	// calls never started (see unstart and giveBack).
	backMu sync.Mutex
	back   []item
}

// callAll is recordAll for a consumer with a Caller. It returns how many
// messages the batches claimed.
func (p *pipeline) callAll() int {
	n := p.c.cfg.Concurrency
	admit := n + 2*p.c.cfg.BatchSize
	cs := &callStage{p: p, slots: make(chan struct{}, n), done: make(chan called, n),
		admitted: make(chan struct{}, admit), settled: make(chan []item, admit),
		keyBusy: map[string]bool{}, keyWait: map[string][]item{}}
	var settler sync.WaitGroup
	settler.Add(2)
	go func() {
		defer settler.Done()
		defer close(cs.settled)
		// Commits of outcomes at once, where the ledger's engine runs
		// them in parallel (PostgreSQL): a call that finishes while one
		// commits goes into the next, not after it. They touch disjoint
		// rows (each reserved msg_id is settled once), so they cannot
		// deadlock.
		var settlers sync.WaitGroup
		for range min(cs.writes(), n) {
			settlers.Go(cs.settleAll)
		}
		settlers.Wait()
	}()
	go func() {
		defer settler.Done()
		cs.handOver()
	}()
	var claimed int
	if k := cs.writes(); k > 1 {
		claimed = cs.reserveAhead(k)
	} else {
		for b := range p.ready {
			if p.failed() {
				continue
			}
			claimed += b.claimed
			toCall, err := cs.reserve(b)
			if err != nil {
				p.fail(err)
				continue
			}
			cs.admit(toCall)
		}
	}
	cs.inflight.Wait()
	close(cs.done)
	settler.Wait()
	if !p.failed() {
		if err := cs.giveBack(); err != nil {
			p.fail(err)
		}
	}
	close(p.recorded)
	return claimed
}

// writes is how many of the consumer's write transactions the ledger runs
// at once (Ledger.ConcurrentWrites): so many reserves, and so many commits
// of outcomes, may run at once.
func (cs *callStage) writes() int {
	return concurrentWrites(cs.p.c.ledger)
}

// reserveAhead is the loop of callAll where the ledger runs k write
// transactions at once (PostgreSQL): the next batches' reserves run while
// the calls of the one before are admitted, up to k at once, since a
// reserve is several round trips to the server and one reserve at a time
// could not keep hundreds of calls busy. The batches are admitted in the
// order they were claimed. It returns how many messages the batches
// claimed.
func (cs *callStage) reserveAhead(k int) int {
	p := cs.p
	type reserved struct {
		toCall []item
		err    error
	}
	// At most k reserves at once: k-1 waiting here, and the one whose
	// result the admitting loop waits for.
	futures := make(chan chan reserved, k-1)
	claimed := 0
	go func() {
		defer close(futures)
		for b := range p.ready {
			if p.failed() {
				continue
			}
			claimed += b.claimed
			f := make(chan reserved, 1)
			futures <- f
			go func() {
				toCall, err := cs.reserve(b)
				f <- reserved{toCall, err}
			}()
		}
	}()
	for f := range futures {
		r := <-f
		switch {
		case r.err != nil:
			p.fail(r.err)
		case !p.failed():
			cs.admit(r.toCall)
		}
	}
	return claimed // written before futures was closed
}

// reserve reserves the msg_ids of a batch, once its claims are durable,
// and returns the deliveries it reserved, to be called (admit). The
// batch's dead letters and duplicates are recorded by the same commit and
// go straight on to be moved out; a delivery whose msg_id is reserved for
// another delivery in flight is held in processing/ and presented again
// shortly (reservationRecheck), until that one's outcome is committed: it
// is then a duplicate, or, if the other failed (a retry is scheduled, or it
// was dead-lettered), it is called itself.
func (cs *callStage) reserve(b inspected) ([]item, error) {
	p, c := cs.p, cs.p.c
	if err := b.err; err != nil {
		return nil, err
	}
	if b.synced != nil {
		if err := <-b.synced; err != nil {
			return nil, err
		}
	}
	items := b.items
	if p.sd.stopped() {
		// Claimed as the stop came: given back, never reserved.
		for _, it := range items {
			if it.state == examined {
				cs.unstart(it)
			}
		}
		return nil, nil
	}
	// The dedup window first: a duplicate it knows is absorbed, and a
	// msg_id another host has in flight waits for its outcome there.
	c.acquire(p.work, items, p.s.ID())
	var batch []*Delivery
	var idx []int
	var finished, toCall []item
	for i, it := range items {
		switch {
		case it.state == examined && it.absorbed:
			finished = append(finished, it)
		case it.state == examined:
			batch = append(batch, it.d)
			idx = append(idx, i)
		}
	}
	if len(batch) == 0 {
		if len(finished) > 0 {
			cs.count(finished)
			p.recorded <- finished
		}
		return nil, nil
	}
	start := time.Now()
	res, err := c.ledger.Reserve(p.work, batch, c.callOwner(p.s.ID()))
	if err == nil && len(res) != len(batch) {
		err = fmt.Errorf("%d reservations for a batch of %d", len(res), len(batch))
	}
	if err != nil {
		c.settleWindow(p.work, items, p.s.ID(), true)
		return nil, fmt.Errorf("ledger: %w", err)
	}
	c.cfg.Observer.Committed(len(batch), time.Since(start))
	for k, r := range res {
		items[idx[k]].r = r
	}
	c.settleWindow(p.work, items, p.s.ID(), false)
	for k, r := range res {
		it := items[idx[k]]
		switch r.Outcome {
		case OutcomeReserved:
			toCall = append(toCall, it)
		case OutcomeBusy:
			c.holdBusy(it.claim)
		default:
			it.r = r
			finished = append(finished, it)
		}
	}
	if len(finished) > 0 {
		cs.count(finished)
		p.recorded <- finished
	}
	if c.cfg.Ordered {
		// A key's claimed deliveries are called in seq order.
		slices.SortStableFunc(toCall, func(a, b item) int {
			return cmp.Compare(a.d.Message.Seq, b.d.Message.Seq)
		})
	}
	return toCall, nil
}

// admit starts the call of each reserved delivery, as slots free up, and
// with Config.Ordered one at a time per order key. If the pass fails
// first, the rest are left uncalled; if the run is stopping, they are
// given back (unstart).
func (cs *callStage) admit(toCall []item) {
	p := cs.p
	for i, it := range toCall {
		if p.sd.stopped() {
			// The run is stopping: what is not admitted yet is given
			// back, uncalled.
			for _, it := range toCall[i:] {
				cs.unstart(it)
			}
			return
		}
		select {
		case cs.admitted <- struct{}{}:
		case <-p.sd.ctx.Done():
			for _, it := range toCall[i:] {
				cs.unstart(it)
			}
			return
		case <-p.stop:
			// The pass failed: the remaining reserved claims stay in
			// processing/ uncalled, for recovery, which also releases
			// their reservations once this session is gone.
			return
		}
		cs.inflight.Add(1)
		if key, ok := cs.orderKey(it); ok {
			cs.keyMu.Lock()
			if cs.keyBusy[key] {
				// In seq order among the key's waiting deliveries,
				// whichever batch claimed them.
				w := cs.keyWait[key]
				i, _ := slices.BinarySearchFunc(w, it.d.Message.Seq, func(x item, seq int64) int {
					if x.d.Message.Seq <= seq {
						return -1 // insert after the equal ones: stable
					}
					return 1
				})
				cs.keyWait[key] = slices.Insert(w, i, it)
				cs.keyMu.Unlock()
				continue
			}
			cs.keyBusy[key] = true
			cs.keyMu.Unlock()
		}
		cs.start(it)
	}
}

// orderKey returns the key whose calls must be made one at a time, with
// Config.Ordered: the message's order key, when it has one.
func (cs *callStage) orderKey(it item) (string, bool) {
	if !cs.p.c.cfg.Ordered || it.d.Message.OrderNo == "" {
		return "", false
	}
	return it.d.Message.OrderNo, true
}

// callWait says how the wait before a call ended (pipeline.awaitCall).
type callWait int

const (
	// callStart: a slot is held; the call may start.
	callStart callWait = iota
	// callGiveBack: no slot is held and the call did not start (the run
	// is stopping, a pause of the gate included): give the delivery back
	// uncalled, unrecorded.
	callGiveBack
	// callLeave: no slot is held and the pass stopped or failed (the
	// lease lost to a takeover included): leave the delivery to recovery.
	callLeave
)

// awaitCall waits, for a call about to start, for a free slot in slots,
// then the queue's pause (an operator's), the gate (the downstream's
// pause, the rate) and the lease. Waiting is not an attempt: unless it
// returns callStart, no slot is held and nothing was called. Both the
// file calls (callStage.start) and the record calls (callRun.start) wait
// here, so that a call of either kind starts under the same conditions.
func (p *pipeline) awaitCall(slots chan struct{}) callWait {
	c := p.c
	select {
	case slots <- struct{}{}:
	case <-p.stop:
		return callLeave
	case <-p.sd.ctx.Done():
		return callGiveBack
	}
	err := c.holdWait(p.sd.ctx, p.stop)
	if err == nil {
		err = c.gate.wait(p.sd.ctx)
	}
	if err == nil {
		err = p.lease.wait(p.sd.ctx, p.stop)
	}
	if errors.Is(err, ErrLeaseLost) {
		// Taken over: the claim is another consumer's, to recover.
		p.fail(err)
		<-slots
		return callLeave
	}
	if err != nil || p.sd.stopped() {
		<-slots
		return callGiveBack
	}
	return callStart
}

// start calls a reserved delivery in a goroutine of its own, once a slot
// is free. If the pass fails first, the delivery is left uncalled; if the
// run is stopping before the call starts (a pause of the gate included),
// it is given back (unstart); if the shutdown timeout cancels the call,
// it is held for recovery (see stopping).
func (cs *callStage) start(it item) {
	p, c := cs.p, cs.p.c
	go func() {
		switch p.awaitCall(cs.slots) {
		case callLeave:
			cs.retire(it)
			return
		case callGiveBack:
			cs.unstart(it)
			cs.retire(it)
			return
		}
		// The calls lock, then the mark, before the call: a recovery
		// releases at once the msg_ids of the claims without a mark,
		// whose call never started, and holds the others until their
		// calls cannot be running, which the lock proves if every call
		// holds it.
		d, err := cs.delivery(it)
		if err == nil {
			err = p.s.MarkCalled(it.claim)
		}
		if err != nil {
			<-cs.slots
			p.fail(err) // uncalled, left for recovery
			cs.retire(it)
			return
		}
		it.called = true
		// A call started is finished even when the run is stopping,
		// unless the shutdown timeout passes first.
		start := time.Now()
		err = callSafely(p.sd.callCtx, c.cfg.Caller, d)
		if p.sd.abandoned(err) {
			// Cut short: the call says nothing of the message, but what
			// it started may still run (a request at its server, a
			// process that left the command's process group). Its claim
			// stays in processing/ with its mark, and its msg_id
			// reserved, as a kill leaves them: the next recovery holds
			// the msg_id until the call cannot be running.
			p.sd.cancelled.Add(1)
			<-cs.slots
			cs.retire(it)
			return
		}
		c.cfg.Observer.Called(kindOf(c.cfg.Caller), callResult(err), time.Since(start))
		c.gate.observe(err)
		cs.done <- called{it: it, err: err}
	}()
}

// delivery is what a call of it is given: its delivery, or, when the
// Caller holds the session's calls lock (LockingCaller), a copy of it
// with the lock (Delivery.CallsLock), taken before the first call. The
// copy keeps the lock out of the delivery the ledger records.
func (cs *callStage) delivery(it item) (*Delivery, error) {
	p := cs.p
	if !holdsCallsLock(p.c.cfg.Caller) {
		return it.d, nil
	}
	f, err := p.s.CallsLock()
	if err != nil {
		return nil, err
	}
	d := *it.d
	d.CallsLock = f
	return &d, nil
}

// retire ends a reserved delivery's passage through this stage, when it
// is abandoned or its settle failed: its order key passes on (passKey),
// and it is counted out.
func (cs *callStage) retire(it item) {
	cs.passKey(it)
	cs.out()
}

// out counts a reserved delivery out of this stage.
func (cs *callStage) out() {
	<-cs.admitted
	cs.inflight.Done()
}

// passKey gives a delivery's order key, with Config.Ordered, to the next
// delivery waiting for it, and starts that one's call. The next one is
// counted in inflight already, so inflight cannot reach zero while a key
// has deliveries waiting.
func (cs *callStage) passKey(it item) {
	if key, ok := cs.orderKey(it); ok {
		cs.keyMu.Lock()
		var next *item
		if w := cs.keyWait[key]; len(w) > 0 {
			next = &w[0]
			cs.keyWait[key] = w[1:]
			if len(w) == 1 {
				delete(cs.keyWait, key)
			}
		} else {
			delete(cs.keyBusy, key)
		}
		cs.keyMu.Unlock()
		if next != nil {
			cs.start(*next)
		}
	}
}

// unstart sets aside a reserved delivery whose call never started and
// will not in this run: the run is stopping. giveBack returns it to
// inbox/ at the end of the pass.
func (cs *callStage) unstart(it item) {
	cs.backMu.Lock()
	cs.back = append(cs.back, it)
	cs.backMu.Unlock()
}

// giveBack ends a stopping pass with a Caller: the claims set aside
// (unstart) and those of batches that reached the recording stage after
// the stop go back to inbox/ unrecorded, as a recovery would send them
// (I7: a claim without a recorded outcome is consumed again), and their
// reservations are removed. It runs once no call of the pass is in flight
// or settling. The calls cut short by the shutdown timeout are not among
// them: their claims and reservations stay for recovery (leaveCut). The
// reservations and the dedup window's keys go first: a claim back in
// inbox/ may be claimed by another consumer at once, and would wait for
// them. A crash half-way leaves the rest to recovery, which does the
// same.
func (cs *callStage) giveBack() error {
	p, c := cs.p, cs.p.c
	cs.backMu.Lock()
	back := cs.back
	cs.back = nil
	cs.backMu.Unlock()
	if len(back) == 0 {
		return nil
	}
	cut := p.sd.cancelled.Load() > 0
	// All the session's reservations when no call was cut short: every
	// one it still holds is of these claims. Else theirs alone.
	var err error
	if cut {
		claims := make([]string, len(back))
		for i, it := range back {
			claims[i] = it.d.Claim
		}
		_, err = c.ledger.ReleaseClaims(p.work, p.s.ID(), claims)
	} else {
		_, err = c.ledger.ReleaseReservations(p.work, p.s.ID())
	}
	if err != nil {
		return fmt.Errorf("give back claims not called: %w", err)
	}
	// Their keys in the dedup window too (compare-and-delete of this
	// session's), for the same reason: another consumer's delivery of one
	// would wait for the in-flight TTL instead of calling.
	c.settleWindow(p.work, back, p.s.ID(), true)
	c.moves.Lock()
	defer c.moves.Unlock()
	for _, it := range back {
		if _, err := p.s.Finish(it.claim, queue.Inbox); err != nil {
			return fmt.Errorf("give back claims not called: %w", err)
		}
	}
	if !c.cfg.Relaxed {
		if err := c.dir.Sync(queue.Inbox); err != nil {
			return fmt.Errorf("give back claims not called: %w", err)
		}
	}
	c.log.Info("stopping: claims not called given back to inbox/", "claims", len(back))
	return nil
}

// DefaultPauseAfter is Config.PauseAfter when it is zero.
const DefaultPauseAfter = 10

// gate paces a consumer's calls to the downstream: at most Config.Rate
// calls a second (a token bucket of one), and none at all during a pause.
// A pause begins when a call fails with a RetryAfterError (an HTTP 429 or
// 503 with Retry-After: the downstream said how long), for that long, or
// after PauseAfter transient failures in a row, for the retry policy's
// delay of that many rounds. A throttled or failing downstream then stops
// getting Concurrency calls at once; only the calls already in flight
// finish. The pause is logged when it begins, not once per message.
type gate struct {
	limiter *rate.Limiter // nil: no rate
	after   int
	retry   Retry
	log     *slog.Logger

	mu     sync.Mutex
	until  time.Time
	failed int // transient failures in a row
	rounds int // pauses in a row for failures, for the backoff
}

func newGate(cfg Config, log *slog.Logger) *gate {
	g := &gate{after: cfg.PauseAfter, retry: cfg.Retry.withDefaults(), log: log}
	if cfg.Rate > 0 {
		g.limiter = rate.NewLimiter(rate.Limit(cfg.Rate), 1)
	}
	return g
}

// wait returns when a call may start: after any pause, and within the rate.
// Its only error is ctx's, once ctx is done: a wait is never a failure of
// the call it precedes. (rate.Limiter.Wait fails at once when ctx's
// deadline is nearer than the next token; a consumer whose context has a
// deadline must then stop at that deadline, not count an attempt.)
func (g *gate) wait(ctx context.Context) error {
	for {
		g.mu.Lock()
		d := time.Until(g.until)
		g.mu.Unlock()
		if d <= 0 {
			break
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	if g.limiter == nil {
		return nil
	}
	r := g.limiter.Reserve() // never refused: one token, a burst of one
	d := r.Delay()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		r.Cancel() // the token goes back to the bucket
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// observe learns from a call's outcome.
func (g *gate) observe(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ra *RetryAfterError
	switch {
	case err == nil:
		g.failed, g.rounds = 0, 0
		return
	case IsPermanent(err):
		return // the message is at fault, not the downstream
	case errors.As(err, &ra) && ra.After > 0:
		g.pause(ra.After, "the downstream asked to retry later", err)
		return
	}
	g.failed++
	if g.after > 0 && g.failed >= g.after {
		g.rounds++
		g.pause(backoffBound(g.retry.Base, g.retry.Cap, g.rounds-1), "transient failures in a row", err)
		g.failed = 0
	}
}

// pause stops new calls for d, unless a longer pause runs already.
func (g *gate) pause(d time.Duration, why string, err error) {
	until := time.Now().Add(d)
	if !until.After(g.until) {
		return
	}
	if time.Now().After(g.until) {
		g.log.Warn("calls paused", "for", d, "why", why, "failures", g.failed, "err", err)
	}
	g.until = until
}
