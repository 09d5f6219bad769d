package relay

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/ledger"
)

// The relay's loop, pipe.run. One goroutine owns every field of pipe:
//
//   - it looks for aggregates with work (Outbox.Heads) and takes their
//     leases (Outbox.AcquireLeases, one commit for all);
//   - a reader goroutine reads each held aggregate's rows in id order,
//     Batch at a time, and makes their events' documents (Event.Body),
//     ahead of the sending: one read per aggregate under way at a time,
//     asked for on reads (capacity Aggregates, the reads of one turn of
//     the loop in one message) and answered on readDone (the same), so
//     that neither side ever blocks on the other. An aggregate's read
//     asks for those of the others about to need one too, and the reader
//     answers all it has been asked in one query (Outbox.RowsAfterEach):
//     a database reads each page of the interleaved rows once. The
//     relay holds the lease, so the reader reads on from the last row
//     read without waiting for marks;
//   - it sends: one event of each aggregate in turn while fewer than
//     Window are in flight; to a Pipeline many of one aggregate at once, in
//     order, to a plain Target one of an aggregate at a time (a goroutine
//     per Publish);
//   - the acknowledgements come back on acks (capacity Window, so that no
//     sender ever blocks on it); an aggregate's events are settled in its
//     order: the acknowledged prefix is marked, and at its first failure
//     k the aggregate stops sending, waits for the rest of its window, and
//     records k's failure (a retry later, or parked); the events after k
//     that were acknowledged are not marked, and are sent again after k,
//     so that none is marked published before k is;
//   - the marks, with the renewal of the leases held and the release of
//     the aggregates finished, are committed in one transaction
//     (Outbox.CommitPublished) by a goroutine of their own, one commit at a time,
//     while sending goes on; its outcome comes back on committed. An
//     aggregate released is not taken again before that commit is in, so
//     that its acknowledged rows are never read as unpublished.
type pipe struct {
	r     *Relay
	pl    Pipeline // nil: a plain Target
	acks  chan ack
	block bool // Policy is PolicyBlock

	reads    chan []readReq
	toRead   []readReq // asked for this turn of the loop, sent before it waits
	readDone chan readRes

	active   []*work
	byName   map[string]*work
	settling map[string]bool // finished, its release not committed yet
	rr       int
	inflight int

	marks   []int64
	release []string

	committing  bool
	committed   chan commitResult
	lastCommit  time.Time
	lastRenew   time.Time
	lastSettled time.Time // the last commit that released aggregates
	lastLook    time.Time
	waiting     bool // the last look left rows waiting: a retry's time, another relay's lease
}

// work is an aggregate a relay holds the lease of.
type work struct {
	name     string
	events   []*Event // read, not sent yet
	after    int64    // the last row id read
	more     bool     // the last read was full: more rows may follow
	reading  bool     // a read is under way
	sent     []*sent  // sent, in order, not settled yet
	inflight int
	// stopped: nothing more is sent (a failure, a parked row under
	// PolicyBlock, a lost lease, the relay's stop); the aggregate is
	// finished once its window is settled.
	stopped bool
	lost    bool // the lease ran out and another relay took it
	// failing is set by a failure's callback, before the loop takes the
	// failure: no later event of the aggregate is sent meanwhile (a
	// failure found in Send itself is thus never passed by the next one).
	failing atomic.Bool
}

type sent struct {
	row  ledger.OutboxRow
	ev   *Event
	done bool
	err  error
}

type readReq struct {
	w     *work
	after int64
}

type readRes struct {
	w      *work
	events []*Event
	full   bool
	err    error
}

type ack struct {
	w   *work
	s   *sent
	err error
}

type commitResult struct {
	lost     []string
	released []string
	at       time.Time
	err      error
}

// Commit pacing: a commit is started once this many marks wait, or this
// long after the last one began; with nothing in flight, at once.
const (
	commitMarks = 4096
	commitEvery = 100 * time.Millisecond
	// finalCommit bounds the commits of a relay that is stopping.
	finalCommit = 10 * time.Second
)

func newPipe(r *Relay) *pipe {
	p := &pipe{
		r: r, acks: make(chan ack, r.o.Window+1), block: r.o.Policy == PolicyBlock,
		byName: map[string]*work{}, settling: map[string]bool{}, committed: make(chan commitResult, 1),
		reads: make(chan []readReq, r.o.Aggregates), readDone: make(chan readRes, r.o.Aggregates),
	}
	p.pl, _ = r.target.(Pipeline)
	return p
}

// run is Relay.Run's loop.
func (p *pipe) run(ctx context.Context) error {
	// The sends, the reads of held aggregates and the commits outlive a
	// stop: what is in flight is waited for and marked.
	wctx := context.WithoutCancel(ctx)
	cctx := wctx
	go p.reader(wctx)
	defer close(p.reads)
	stopping := false
	var lookAt time.Time
	for {
		if !stopping && ctx.Err() != nil {
			stopping = true
			for _, w := range p.active {
				w.stopped, w.events = true, nil
			}
			var cancel context.CancelFunc
			cctx, cancel = context.WithTimeout(wctx, finalCommit)
			defer cancel()
		}
		if !stopping && len(p.active) < p.r.o.Aggregates && !time.Now().Before(lookAt) {
			took, err := p.look(ctx)
			if err != nil {
				if ctx.Err() != nil {
					continue
				}
				return err
			}
			lookAt = p.lastLook.Add(p.r.o.Poll)
			if took == 0 && len(p.active) > 0 {
				// Busy, and nothing new last time: a look reads every
				// aggregate's head, which costs with a large backlog.
				lookAt = p.lastLook.Add(busyLooks * p.r.o.Poll)
			}
		}
		if !stopping {
			if err := p.dispatch(wctx); err != nil {
				return err
			}
		}
		if err := p.settleFinished(); err != nil {
			return err
		}
		p.maybeCommit(cctx)
		if len(p.active) == 0 && !p.committing && len(p.marks) == 0 && len(p.release) == 0 {
			if stopping {
				return ctx.Err()
			}
			if !p.lastLook.After(p.lastSettled) {
				lookAt = time.Time{} // a commit came in after the last look: look again
				continue
			}
			if !p.waiting && !p.r.o.Watch {
				return nil
			}
		}
		p.sendReads()
		if err := p.wait(ctx, stopping, lookAt); err != nil {
			return err
		}
	}
}

// wait blocks until an acknowledgement, a commit's outcome, ctx's end, or
// the next thing due: a look, a commit, a lease renewal.
func (p *pipe) wait(ctx context.Context, stopping bool, lookAt time.Time) error {
	now := time.Now()
	var due time.Time
	consider := func(t time.Time) {
		if due.IsZero() || t.Before(due) {
			due = t
		}
	}
	if !stopping && len(p.active) < p.r.o.Aggregates {
		consider(lookAt)
	}
	if !p.committing {
		if len(p.marks)+len(p.release) > 0 {
			consider(p.lastCommit.Add(commitEvery))
		}
		if len(p.active) > 0 {
			consider(p.lastRenew.Add(p.r.o.Lease / 3))
		}
	}
	var timeout <-chan time.Time
	if !due.IsZero() {
		t := time.NewTimer(max(due.Sub(now), 0))
		defer t.Stop()
		timeout = t.C
	}
	done := ctx.Done()
	if stopping {
		done = nil
	}
	select {
	case a := <-p.acks:
		if err := p.acked(ctx, a); err != nil {
			return err
		}
		// Take what else came in before going round again.
		for range cap(p.acks) {
			select {
			case a := <-p.acks:
				if err := p.acked(ctx, a); err != nil {
					return err
				}
			default:
				return nil
			}
		}
	case res := <-p.committed:
		return p.commitDone(res)
	case res := <-p.readDone:
		return p.readIn(res)
	case <-done:
	case <-timeout:
	}
	return nil
}

// busyLooks is how many Poll intervals a relay busy with aggregates waits
// before it looks again, when its last look found none to take.
const busyLooks = 5

// look takes the aggregates with work that no relay holds, up to
// Options.Aggregates at once, and records whether rows are left waiting.
// It returns how many it took.
func (p *pipe) look(ctx context.Context) (int, error) {
	o := &p.r.o
	heads, err := p.r.db.Outbox().Heads(ctx, o.Policy == PolicySkip, maxHeads)
	if err != nil {
		return 0, err
	}
	now := time.Now()
	p.lastLook = now
	p.waiting = len(p.settling) > 0
	var want []string
	for _, h := range heads {
		if len(p.active)+len(want) >= o.Aggregates {
			break
		}
		switch {
		case p.byName[h.Aggregate] != nil:
		case p.settling[h.Aggregate]:
			p.waiting = true
		case h.Parked:
			// PolicyBlock: the aggregate waits for an operator.
		case h.NextAt.After(now):
			p.waiting = true
		default:
			want = append(want, h.Aggregate)
		}
	}
	held, err := p.r.db.Outbox().AcquireLeases(ctx, p.r.owner, want, now, now.Add(o.Lease))
	if err != nil {
		return 0, err
	}
	if len(held) < len(want) {
		p.waiting = true // in another relay's lease
	}
	for _, name := range held {
		w := &work{name: name, more: true}
		p.active = append(p.active, w)
		p.byName[name] = w
		p.read(w)
	}
	if len(held) > 0 && p.lastRenew.IsZero() {
		p.lastRenew = now
	}
	return len(held), nil
}

// maxHeads bounds the aggregates one look reads.
const maxHeads = 1000

// dispatch sends while the window has room: one event of each aggregate
// in turn.
func (p *pipe) dispatch(ctx context.Context) error {
	for p.inflight < p.r.o.Window {
		progressed := false
		n := len(p.active)
		for i := 0; i < n && p.inflight < p.r.o.Window; i++ {
			w := p.active[(p.rr+i)%n]
			if w.stopped || (p.pl == nil && w.inflight > 0) || w.failing.Load() {
				continue
			}
			if e := p.next(w); e != nil {
				p.send(ctx, w, e)
				progressed = true
			}
		}
		p.rr++
		if !progressed {
			break
		}
	}
	return nil
}

// next is w's next event to send, nil when there is none in hand; it asks
// for the next rows once a batch or less is left in hand, so that the
// reader keeps ahead of the sending.
func (p *pipe) next(w *work) *Event {
	for {
		if len(w.events) <= p.r.o.Batch {
			p.read(w)
		}
		if len(w.events) == 0 {
			return nil
		}
		e := w.events[0]
		w.events = w.events[1:]
		if !e.Row.Parked {
			return e
		}
		if p.block {
			// Its later rows wait behind it.
			w.stopped, w.events = true, nil
			return nil
		}
	}
}

// read asks the reader for w's rows after the last read, unless a read
// is under way or there are none; and for the rows of every other
// aggregate held that would ask within the next Batch events, so that
// one query answers them together.
func (p *pipe) read(w *work) {
	if !p.ask(w) {
		return
	}
	for _, o := range p.active {
		if o != w && len(o.events) <= 2*p.r.o.Batch {
			p.ask(o)
		}
	}
}

// ask adds w's next read to those sent before the loop waits, unless a
// read is under way or there are none; it reports whether it did.
func (p *pipe) ask(w *work) bool {
	if w.reading || !w.more || w.stopped {
		return false
	}
	w.reading = true
	p.toRead = append(p.toRead, readReq{w, w.after})
	return true
}

// sendReads hands the reads asked for this turn to the reader, in one
// message: reads has room, since no aggregate has two reads under way.
func (p *pipe) sendReads() {
	if len(p.toRead) > 0 {
		p.reads <- p.toRead
		p.toRead = nil
	}
}

// reader answers the reads, in the order asked: the rows, and each
// event's document made ahead (a failure to make one is the send's). The
// reads the loop asked for in one turn, and those asked for while the
// reader was busy, are answered together, readsAtOnce to a query
// (Outbox.RowsAfterEach).
func (p *pipe) reader(ctx context.Context) {
	var queued []readReq
	for asked := range p.reads {
		queued = append(queued[:0], asked...)
	more:
		for {
			select {
			case asked, ok := <-p.reads:
				if !ok {
					break more
				}
				queued = append(queued, asked...)
			default:
				break more
			}
		}
		for reqs := range slices.Chunk(queued, readsAtOnce) {
			p.answer(ctx, reqs)
		}
	}
}

// answer reads the rows of reqs in one query, and hands each read its
// events.
func (p *pipe) answer(ctx context.Context, reqs []readReq) {
	reads := make([]ledger.OutboxRead, len(reqs))
	for i, req := range reqs {
		reads[i] = ledger.OutboxRead{Aggregate: req.w.name, After: req.after}
	}
	rows, err := p.r.db.Outbox().RowsAfterEach(ctx, reads, p.r.o.Batch)
	for i, req := range reqs {
		res := readRes{w: req.w, err: err}
		if err == nil {
			res.full = len(rows[i]) == p.r.o.Batch
			res.events = make([]*Event, 0, len(rows[i]))
			for _, row := range rows[i] {
				e := &Event{ID: EventID(p.r.queueID, row.ID), Row: row}
				if !row.Parked {
					_, _ = e.Body()
				}
				res.events = append(res.events, e)
			}
		}
		p.readDone <- res
	}
}

// readsAtOnce bounds the reads one query answers.
const readsAtOnce = 64

// readIn takes a read's rows.
func (p *pipe) readIn(res readRes) error {
	w := res.w
	w.reading = false
	if res.err != nil {
		return res.err
	}
	w.more = res.full
	if n := len(res.events); n > 0 {
		w.after = res.events[n-1].Row.ID
	}
	if !w.stopped {
		w.events = append(w.events, res.events...)
	}
	return nil
}

// send hands e to the target.
func (p *pipe) send(ctx context.Context, w *work, e *Event) {
	s := &sent{row: e.Row, ev: e}
	w.sent = append(w.sent, s)
	w.inflight++
	p.inflight++
	done := func(err error) {
		if err != nil {
			w.failing.Store(true)
		}
		p.acks <- ack{w, s, err}
	}
	if p.pl != nil {
		p.pl.Send(ctx, e, done)
		return
	}
	go func() { done(p.r.target.Publish(ctx, e)) }()
}

// acked takes one acknowledgement or failure, and settles its aggregate
// as far as its order allows.
func (p *pipe) acked(ctx context.Context, a ack) error {
	a.s.done, a.s.err = true, a.err
	a.w.inflight--
	p.inflight--
	if p.r.o.OnEvent != nil {
		p.r.o.OnEvent(a.s.ev, a.err)
	}
	if a.err == nil {
		p.r.stats.Published++
	} else {
		p.r.stats.Failed++
		a.w.stopped, a.w.events = true, nil
	}
	return p.advance(context.WithoutCancel(ctx), a.w)
}

// advance settles w's sent events in order: the acknowledged ones up to
// the first failure are marked; the first failure, once nothing of w is
// in flight, is recorded on its row, and what w sent after it is left
// unmarked, to be sent again after it (PolicySkip and a parked row: the
// acknowledged ones after it are marked too).
func (p *pipe) advance(ctx context.Context, w *work) error {
	for len(w.sent) > 0 {
		s := w.sent[0]
		if !s.done {
			break
		}
		if s.err == nil {
			p.marks = append(p.marks, s.row.ID)
			w.sent = w.sent[1:]
			continue
		}
		if w.inflight > 0 {
			break // the rest of its window first
		}
		parked, err := p.r.fail(ctx, &s.row, s.err)
		if err != nil {
			return err
		}
		w.sent = w.sent[1:]
		if parked && !p.block {
			continue
		}
		if !parked {
			p.waiting = true
		}
		w.sent = nil
	}
	return nil
}

// settleFinished finishes the aggregates with nothing left in hand or in
// flight: their leases are released with the next commit.
func (p *pipe) settleFinished() error {
	kept := p.active[:0]
	for _, w := range p.active {
		done := w.inflight == 0 && len(w.sent) == 0 && !w.reading && (w.stopped || len(w.events) == 0 && !w.more)
		if !done {
			kept = append(kept, w)
			continue
		}
		delete(p.byName, w.name)
		if !w.lost {
			p.release = append(p.release, w.name)
			p.settling[w.name] = true
		}
	}
	clear(p.active[len(kept):])
	p.active = kept
	return nil
}

// maybeCommit starts a commit when one is due and none is under way.
func (p *pipe) maybeCommit(ctx context.Context) {
	if p.committing {
		return
	}
	now := time.Now()
	pending := len(p.marks) + len(p.release)
	due := len(p.marks) >= commitMarks ||
		pending > 0 && (p.inflight == 0 || now.Sub(p.lastCommit) >= commitEvery) ||
		len(p.active) > 0 && now.Sub(p.lastRenew) >= p.r.o.Lease/3
	if !due {
		return
	}
	c := ledger.OutboxCommit{Published: p.marks, Target: p.r.o.Target, At: now, Expires: now.Add(p.r.o.Lease), Release: p.release}
	for _, w := range p.active {
		if !w.lost {
			c.Renew = append(c.Renew, w.name)
		}
	}
	p.marks, p.release = nil, nil
	p.committing, p.lastCommit = true, now
	go func() {
		lost, err := p.r.db.Outbox().CommitPublished(ctx, p.r.owner, c)
		p.committed <- commitResult{lost: lost, released: c.Release, at: now, err: err}
	}()
}

// commitDone takes a commit's outcome.
func (p *pipe) commitDone(res commitResult) error {
	p.committing = false
	if res.err != nil {
		return res.err
	}
	p.lastRenew = res.at
	if len(res.released) > 0 {
		for _, name := range res.released {
			delete(p.settling, name)
		}
		p.lastSettled = time.Now()
	}
	for _, name := range res.lost {
		// Another relay goes on from its first unpublished row; what this
		// one has in flight is still marked once acknowledged.
		if w := p.byName[name]; w != nil {
			w.lost, w.stopped, w.events = true, true, nil
		}
	}
	return nil
}
