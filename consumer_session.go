package spool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spoolq/spool/queue"
)

// What runs beside the passes of a session (see the drawing in
// consumer.go): the lease keeper, the recovery clock, the operator's pause
// and holds, the watch of inbox/ between passes, and the graceful stop.

// leaseKeeper renews a session's lease every third of Config.Lease, in a
// goroutine of its own, and says whether the lease holds. The lease is the
// session directory's mtime (queue.Session.Touch), and, on a ledger that
// keeps leases (Ledger.HoldsLeases: one shared by hosts), the session's lease row,
// judged by the database's clock: there it is the row that other hosts
// go by.
//
// While a renewal fails, or once the lease may have expired by this
// host's own clock since the last renewal was sent (a process stopped or a
// host frozen, woken before its renewal could run), no new claim is made,
// no new call started and no file moved out (wait): consumers on other
// hosts take over the claims of a session whose lease has lapsed, so a
// session that cannot renew must not go on taking work it may lose, above
// all calls, which another host may then make again. The renewal is
// retried every second or so, and the work resumes as soon as one
// succeeds. A renewal that finds the lease taken over (ErrLeaseLost) is
// final: the session's claims are another consumer's now, every write of
// them is refused by the ledger (fencing), and the run ends the session
// and joins a new one.
type leaseKeeper struct {
	s   *queue.Session
	c   *Consumer
	ll  Ledger // one that HoldsLeases; nil: the directory's mtime alone
	mu  sync.Mutex
	ok  chan struct{} // closed while the lease holds
	end chan struct{} // closed by stop
	// until is when the lease may have expired by this host's clock: the
	// send time of the last renewal that succeeded, plus most of the
	// lease (the database starts the lease when it runs the renewal,
	// later than this host sent it). Under mu.
	until time.Time
	// gone is closed once the lease was taken over; lost is the error.
	gone chan struct{}
	lost error
	wg   sync.WaitGroup
}

// errCutOff marks a session that failed (a write, a recovery) while its
// host could not reach a ledger that keeps leases: a renewal tried at
// once failed too. Such a host is partitioned from the ledger, and its
// session's claims will be taken over, so the session is given up (its
// claims left for recovery, as after a lost lease) and the run joins a new
// one once the ledger answers again (errJoinLease until then), instead of
// failing (exit 3).
var errCutOff = errors.New("cut off from the ledger")

// errJoinLease marks a session that could not acquire its lease.
var errJoinLease = errors.New("cannot acquire the session's lease")

// classify marks err, a failure of the session, as errCutOff when the
// ledger keeps leases and a renewal tried now fails too (not with
// ErrLeaseLost: that is the lease lost, which err then becomes).
func (k *leaseKeeper) classify(err error) error {
	if err == nil || k.ll == nil || errors.Is(err, ErrLeaseLost) {
		return err
	}
	perr := k.renew()
	switch {
	case perr == nil:
		return err // the ledger answers: a failure of its own
	case errors.Is(perr, ErrLeaseLost):
		k.taken(perr)
		return perr
	}
	return fmt.Errorf("%w: %w (renewal: %v)", errCutOff, err, perr)
}

// leaseMargin is the share of the lease that wait keeps back from the
// lease's end, for the drift between the hosts' clock rates.
const leaseMargin = 8

// keepLease acquires s's lease in the ledger, when the ledger keeps
// leases, and starts renewing it; stop ends the renewals.
func (c *Consumer) keepLease(ctx context.Context, s *queue.Session) (*leaseKeeper, error) {
	k := &leaseKeeper{s: s, c: c, ll: leaseLedger(c.ledger), ok: make(chan struct{}),
		end: make(chan struct{}), gone: make(chan struct{})}
	sent := time.Now()
	if k.ll != nil {
		if err := k.ll.AcquireSessionLease(ctx, s.ID(), c.cfg.Lease); err != nil {
			return nil, fmt.Errorf("lease: %w", err)
		}
	}
	k.until = sent.Add(c.cfg.Lease - c.cfg.Lease/leaseMargin)
	close(k.ok) // Join made the directory's lease fresh, and Acquire the row
	k.wg.Add(1)
	go k.loop()
	return k, nil
}

func (k *leaseKeeper) loop() {
	defer k.wg.Done()
	every := k.c.cfg.Lease / 3
	retry := min(every, time.Second)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-k.end:
			return
		case <-t.C:
		}
		sent := time.Now()
		err := k.renew()
		switch {
		case errors.Is(err, ErrLeaseLost):
			k.taken(err)
			return
		case err != nil:
			k.hold(err)
			t.Reset(retry)
			continue
		}
		k.renewed(sent)
		t.Reset(every)
	}
}

// renew renews the lease once: the row first, then the directory.
func (k *leaseKeeper) renew() error {
	if k.ll != nil {
		ctx, cancel := context.WithTimeout(context.Background(), k.c.cfg.Lease/3)
		err := k.ll.RenewSessionLease(ctx, k.s.ID(), k.c.cfg.Lease)
		cancel()
		if err != nil {
			return err
		}
	}
	return k.s.Touch()
}

// hold holds new claims, calls and moves after a failed renewal.
func (k *leaseKeeper) hold(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	select {
	case <-k.ok:
		k.ok = make(chan struct{})
		k.c.log.Warn("lease renewal failed: no new claims or calls until it is renewed",
			"session", k.s.ID(), "err", err)
	default: // held already
	}
}

// renewed lets claims and calls go on after a successful renewal sent at
// sent.
func (k *leaseKeeper) renewed(sent time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.until = sent.Add(k.c.cfg.Lease - k.c.cfg.Lease/leaseMargin)
	select {
	case <-k.ok:
	default:
		close(k.ok)
		k.c.log.Info("lease renewed: claims and calls resume", "session", k.s.ID())
	}
}

// taken ends the lease for good: it was taken over.
func (k *leaseKeeper) taken(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lost != nil {
		return
	}
	k.lost = err
	close(k.gone)
}

// wait returns nil once the lease holds; the ErrLeaseLost error once it
// was taken over; ctx's error if ctx is done first, errStopScan if stop is
// closed first.
func (k *leaseKeeper) wait(ctx context.Context, stop <-chan struct{}) error {
	for {
		k.mu.Lock()
		ok, lost := k.ok, k.lost
		if lost == nil && time.Now().After(k.until) {
			// The renewal is late by this host's clock (the process was
			// stopped, or the renewals hang): hold until it is done.
			select {
			case <-k.ok:
				k.ok = make(chan struct{})
				ok = k.ok
				k.c.log.Warn("lease may have expired: no new claims or calls until it is renewed",
					"session", k.s.ID(), "renewed_until", k.until)
			default:
			}
		}
		k.mu.Unlock()
		if lost != nil {
			return lost
		}
		select {
		case <-ok:
			return nil
		default:
		}
		select {
		case <-ok:
			// Renewed: check the deadline again.
		case <-k.gone:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return errStopScan
		}
	}
}

// err is the ErrLeaseLost error once the lease was taken over, else nil.
func (k *leaseKeeper) err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lost
}

// stop ends the renewals and waits for the goroutine to return.
func (k *leaseKeeper) stop() {
	close(k.end)
	k.wg.Wait()
}

// drop removes the session's lease row at a clean close, its directory
// gone: nothing is left for another host to take over.
func (k *leaseKeeper) drop(ctx context.Context) error {
	if k.ll == nil {
		return nil
	}
	if err := k.ll.DropSessionLease(ctx, k.s.ID()); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	return nil
}

// DefaultRecoverInterval is how often a consumer recovers dead consumers'
// claims while it runs, whatever it is doing: a consumer killed on this
// host has its claims back in inbox/ within about a second, the held
// msg_ids of its calls are released within a second of their bound, and
// a frozen host's claims are taken over within its lease and a second.
// A recovery with nothing to recover lists processing/ and, on a ledger
// that keeps leases, asks the ledger about each session of another host:
// once a second, that is nothing next to a pass (a 20 000-message drain
// is not measurably slower for it).
const DefaultRecoverInterval = time.Second

// recoverer runs a session's recoveries of dead consumers' claims
// (Consumer.recover): on its own clock, every Config.RecoverInterval, in a
// goroutine of its own (loop), so that a pass over a long backlog does not
// hold them back, and when the run goroutine asks (now): before the first
// pass, and at the end of a drain. Recoveries are one at a time (mu, and
// the consumer's recoverMu under it).
//
// The clock never touches the run's Stats, which the pass is writing: the
// claims it recovers are counted in pending, which the run goroutine adds
// to Stats.Recovered between passes (take). A recovery of the clock that
// fails ends the session as a recovery between passes does: failed is
// closed, the pass in progress fails with the error (pass), and the run
// abandons the session (lease.classify). The clock stops, and is waited
// for, before the session is closed or abandoned (stop): it never
// recovers the consumer's own session, whose lock the consumer holds until
// then.
type recoverer struct {
	c    *Consumer
	work context.Context // the session's ledger context, never cancelled

	// mu is held through each recovery, and guards closed: a drain's last
	// recovery found nothing, so none may run after it (the drain ends on
	// what it found).
	mu     sync.Mutex
	closed bool

	// pending counts the claims recovered and not yet in the run's Stats.
	pending atomic.Int64
	// back (1) is rung when the clock recovered claims, so that the pass
	// scans inbox/ again and takes them next (claimAll), instead of after
	// the rest of the backlog.
	back chan struct{}
	// failed is closed when a recovery of the clock failed; fault, set
	// before, is its error.
	failed chan struct{}
	fault  error

	end      chan struct{} // closed by stop
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// newRecoverer returns the recoverer of a session; begin starts its clock.
func (c *Consumer) newRecoverer(work context.Context) *recoverer {
	return &recoverer{c: c, work: work, back: make(chan struct{}, 1),
		failed: make(chan struct{}), end: make(chan struct{})}
}

// begin runs the session's first recovery, so that the claims of
// consumers that died before it started are recovered before it claims
// anything (I5), adds what it recovered to st, and starts the clock. The
// clock stops at stop, at its first failure, or once ctx, the run's, is
// cancelled: a consumer that is stopping finishes its work and leaves;
// what dies meanwhile is the next consumer's to recover.
func (r *recoverer) begin(ctx context.Context, st *Stats) error {
	n, err := r.now(false)
	st.Recovered += n
	if err != nil {
		return err
	}
	r.wg.Add(1)
	go r.loop(ctx)
	return nil
}

func (r *recoverer) loop(ctx context.Context) {
	defer r.wg.Done()
	every := r.c.cfg.RecoverInterval
	// A timer reset after each recovery, not a ticker: a recovery slower
	// than the interval (a slow ledger) is not followed at once by another.
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-r.end:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.tick(); err != nil {
			r.fault = err
			close(r.failed)
			return
		}
		t.Reset(every)
	}
}

// tick is one recovery of the clock.
func (r *recoverer) tick() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	var st Stats
	err := r.c.recover(r.work, &st, nil)
	if st.Recovered > 0 {
		r.pending.Add(int64(st.Recovered))
		select {
		case r.back <- struct{}{}:
		default: // rung already
		}
	}
	return err
}

// now runs a recovery at once, for the run goroutine, and returns the
// claims recovered since the last take, by it and by the clock. last is
// the end of a drain: if nothing was recovered, no recovery runs after
// this one, so that the drain ends on what this one saw.
func (r *recoverer) now(last bool) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var st Stats
	err := r.c.recover(r.work, &st, nil)
	r.pending.Add(int64(st.Recovered))
	n := int(r.pending.Swap(0))
	if last && n == 0 && err == nil {
		r.closed = true
	}
	return n, err
}

// take returns the claims recovered by the clock since the last take.
func (r *recoverer) take() int { return int(r.pending.Swap(0)) }

// returned reports, once, that the clock put claims back since it was
// last asked.
func (r *recoverer) returned() bool {
	select {
	case <-r.back:
		return true
	default:
		return false
	}
}

// err is the error of the clock's failed recovery, nil while none failed.
func (r *recoverer) err() error {
	select {
	case <-r.failed:
		return r.fault
	default:
		return nil
	}
}

// stop stops the clock and waits for a recovery in progress to end. It
// may be called more than once, and before begin.
func (r *recoverer) stop() {
	r.stopOnce.Do(func() { close(r.end) })
	r.wg.Wait()
}

// halt stops the clock, as the session ends, and adds to st what it
// recovered since the last take.
func (r *recoverer) halt(st *Stats) {
	r.stop()
	st.Recovered += r.take()
}

// errPaused is the cause of a drain's stop at an operator's pause.
var errPaused = errors.New("the queue is paused")

// holdWatch is what a consumer knows of the operator's pause of its queue
// and of the msg_ids held (Ledger.Holds, hold.go): read at the start of a
// run (begin) and then every Config.HoldInterval by a goroutine of its own
// (loop), so that no claim and no call waits for the ledger. It outlives
// a run, so that a consumer run again says a pause once, not at each run.
//
// While the queue is paused, or before a read has succeeded, claimChunk
// and awaitCall (before each call) wait (wait); the claims and calls already made go
// on. A drain instead stops at a pause as at a signal (its context is
// cancelled, onPause): it finishes what it started, gives back what it did
// not call, and ends (Stats.Paused). A held msg_id is looked up in ids by
// the examining workers (isHeld); the set is replaced, never changed, so
// the lookup takes no lock.
type holdWatch struct {
	c     *Consumer
	every time.Duration

	ids atomic.Pointer[map[string]struct{}]

	// mu guards what follows. change is closed and replaced whenever the
	// pause changes (or the first read succeeds), waking wait.
	mu      sync.Mutex
	known   bool   // a read has succeeded
	paused  *Pause // the pause as last read
	version int64
	change  chan struct{}
	failing bool // the last read failed (said once)
	onPause func()
}

func newHoldWatch(c *Consumer) *holdWatch {
	return &holdWatch{c: c, every: c.cfg.HoldInterval, change: make(chan struct{})}
}

// watchHolds begins a run's reading of the pause and holds: it reads them
// once before anything is claimed, then every HoldInterval until the
// returned end is called, which also says in st whether a pause ended the
// run. A drain's first read that fails fails the run (its cron is the
// retry); a watch's waits for a read that succeeds before it claims. A
// drain's context is replaced by one that a pause cancels.
func (c *Consumer) watchHolds(ctx context.Context, watch bool) (context.Context, func(st *Stats), error) {
	h := c.holds
	var cancel context.CancelCauseFunc
	run := ctx
	if !watch {
		run, cancel = context.WithCancelCause(ctx)
	}
	h.mu.Lock()
	h.onPause = nil
	if cancel != nil {
		h.onPause = func() { cancel(errPaused) }
	}
	h.mu.Unlock()
	if err := h.read(ctx, watch); err != nil && !watch {
		cancel(nil)
		return ctx, nil, fmt.Errorf("consume: %w", err)
	}
	loopCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { h.loop(loopCtx, watch) })
	return run, func(st *Stats) {
		stop()
		wg.Wait()
		if cancel != nil {
			st.Paused = errors.Is(context.Cause(run), errPaused)
			cancel(nil)
		}
	}, nil
}

func (h *holdWatch) loop(ctx context.Context, watch bool) {
	t := time.NewTimer(h.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = h.read(ctx, watch) // said once by read; the last state stands meanwhile
		t.Reset(h.every)
	}
}

// read reads the pause and holds once and takes them in, saying a change
// of the pause, and a failure once (the state last read stands
// meanwhile: a ledger that cannot be read cannot record claims either).
func (h *holdWatch) read(ctx context.Context, watch bool) error {
	h.mu.Lock()
	version := h.version
	if !h.known {
		version = -1 // no set read yet: ask for it
	}
	h.mu.Unlock()
	got, err := h.c.ledger.Holds(ctx, version)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil && !h.failing {
			h.failing = true
			h.c.log.Warn("cannot read the queue's pause and holds from the ledger; going on with what was read last, retried every interval",
				"err", err, "interval", h.every)
		}
		return fmt.Errorf("read the queue's pause and holds: %w", err)
	}
	if h.failing {
		h.failing = false
		h.c.log.Info("the queue's pause and holds are read again")
	}
	if got.MsgIDs != nil {
		ids := got.MsgIDs
		h.ids.Store(&ids)
	}
	was, first := h.paused, !h.known
	h.known, h.paused, h.version = true, got.Paused, got.Version
	switch p := got.Paused; {
	case p != nil && (was == nil || first):
		if watch {
			h.c.log.Warn("queue paused: no new claims or calls until it is resumed (spool resume DIR); those under way finish",
				"by", p.By, "at", p.At, "note", p.Note)
		} else {
			h.c.log.Warn("queue paused: the drain claims nothing more; what it claimed is finished or given back, and it ends (spool resume DIR lets consumers go on)",
				"by", p.By, "at", p.At, "note", p.Note)
		}
		if h.onPause != nil {
			h.onPause()
		}
	case p == nil && was != nil && !first:
		h.c.log.Info("queue resumed: consuming again")
	}
	if first || (was == nil) != (got.Paused == nil) {
		close(h.change)
		h.change = make(chan struct{})
	}
	return nil
}

// wait returns once claims and calls may go on: the queue is not paused,
// as last read, and a read has succeeded. It returns ctx's error once ctx
// is done, and errStopScan once stop is closed.
func (c *Consumer) holdWait(ctx context.Context, stop <-chan struct{}) error {
	h := c.holds
	for {
		h.mu.Lock()
		ok, ch := h.known && h.paused == nil, h.change
		h.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return errStopScan
		}
	}
}

// isHeld reports whether an operator holds msgID, as last read.
func (h *holdWatch) isHeld(msgID string) bool {
	ids := h.ids.Load()
	if ids == nil || msgID == "" {
		return false
	}
	_, ok := (*ids)[msgID]
	return ok
}

// heldAside moves the claim of d into held/ when an operator holds its
// msg_id (a valid message's, or a rejected one's when its key could be
// read), instead of recording it, and reports whether it did. The claim
// is recorded nowhere but in the hold (RecordHeld); if the msg_id was
// released meanwhile, the file goes back to inbox/ at once, to be claimed
// again. A failure leaves the claim for recovery, or, once it is in held/
// and cannot be recorded nor put back, the file there unrecorded, and
// fails the run.
func (c *Consumer) heldAside(s *queue.Session, cl *queue.Claim, d *Delivery) (bool, error) {
	h := c.holds
	id := ""
	switch {
	case d.Message != nil:
		id = d.Message.MsgID
	case d.Reject != nil:
		id = d.Reject.MsgID
	}
	if !h.isHeld(id) {
		return false, nil
	}
	name, err := s.SetAside(cl)
	if err != nil {
		return false, err
	}
	// The ledger's work is never cut short by a stop (see runSession).
	ok, err := h.c.ledger.RecordHeld(context.Background(), HeldAside{File: name, Ino: cl.Ino, Origin: cl.Name, MsgID: id, Consumer: s.ID()})
	if err == nil && ok {
		c.log.Info("held aside: its msg_id is held (spool release DIR --msg-id ID releases it)",
			"file", cl.Name, "held_as", name, "msg_id", id)
		return true, nil
	}
	back, uerr := c.dir.Unhold(name, cl.Name)
	if err != nil || uerr != nil {
		return true, errors.Join(err, uerr)
	}
	c.log.Info("msg_id released as its file was held aside: put back into inbox/", "file", cl.Name, "msg_id", id, "name", back)
	return true, nil
}

// DefaultRescanInterval is how often a watching consumer scans inbox/
// when no notification has made it scan. Notifications are lost only when
// the kernel's queue overflows, which the consumer learns of and answers
// with a scan at once; the rescan bounds what any other loss (a bug, an
// unforeseen filesystem) can delay. A rescan of an idle queue is cheap
// (docs/PERFORMANCE.md, "Watching", has the figure). The claims of dead
// consumers are recovered on a clock of their own
// (DefaultRecoverInterval), and their moves back into inbox/ ring the
// watch.
const DefaultRescanInterval = time.Second

// watcher decides when a watching consumer scans inbox/ again: at once
// when a notification rings (queue.Arrivals), else at the next rescan, the
// next retry due or the time the youngest file held back by MinAge
// settles. Without notifications (Config.Poll, a network filesystem, no
// inotify left) every scan is a rescan, every PollInterval.
type watcher struct {
	c      *Consumer
	a      *queue.Arrivals // nil when polling
	every  time.Duration   // between rescans
	rescan *time.Timer
}

// watch starts the watcher of a Watch run.
func (c *Consumer) watch() *watcher {
	w := &watcher{c: c, every: c.cfg.RescanInterval}
	poll := func(why string, args ...any) *watcher {
		w.every = c.cfg.PollInterval
		c.log.Info(why+"; polling inbox/", append(args, "interval", w.every)...)
		w.rescan = time.NewTimer(w.every)
		return w
	}
	if c.cfg.Poll {
		return poll("notifications not used (Config.Poll, consume --poll)")
	}
	if fs, remote, err := c.dir.RemoteFS(); err != nil {
		return poll("cannot tell inbox/'s filesystem", "err", err)
	} else if remote {
		return poll("inbox/ is on a network or FUSE filesystem, whose notifications miss other hosts' writes", "fs", fs)
	}
	a, err := c.dir.WatchInbox()
	if err != nil {
		return poll("no filesystem notifications", "err", err)
	}
	w.a = a
	w.rescan = time.NewTimer(w.every)
	return w
}

// close stops the watch.
func (w *watcher) close() {
	w.rescan.Stop()
	if w.a != nil {
		if err := w.a.Close(); err != nil {
			w.c.log.Warn("stopping the watch of inbox/", "err", err)
		}
	}
}

// wait returns when inbox/ should be scanned again, or false when ctx is
// done. due is the time the next held retry falls due (held says whether
// there is one). It returns at once too when failed, the recovery clock's,
// is closed: the run then ends the session. Rescans and overflows are
// counted in st and told to the Observer. Nothing on this path waits for a
// batch to fill: an arrival at an idle consumer is scanned, claimed,
// committed and moved at once.
func (w *watcher) wait(ctx context.Context, st *Stats, due time.Time, held bool, failed <-chan struct{}) bool {
	c := w.c
	var soon <-chan time.Time // a retry due, or a young file old enough
	if at, ok := c.young.take(); ok && (!held || at.Before(due)) {
		due, held = at, true
	}
	if held {
		t := time.NewTimer(max(time.Until(due), 0))
		defer t.Stop()
		soon = t.C
	}
	var bell <-chan struct{}
	if w.a != nil {
		bell = w.a.Bell()
	}
	select {
	case <-ctx.Done():
		return false
	case <-failed:
		return true
	case <-soon:
		return true
	case <-w.rescan.C:
		w.rescanned(st, false)
	case <-bell:
		if n := w.a.Overflowed(); n > 0 {
			st.Overflows += n
			c.log.Info("notifications overflowed; rescanning", "overflows", st.Overflows)
			w.rescanned(st, true)
			return true
		}
		if err := w.a.Err(); err != nil {
			// The bell can no longer be trusted: poll from now on.
			c.log.Warn("the watch of inbox/ failed; polling inbox/", "err", err, "interval", c.cfg.PollInterval)
			w.a.Close()
			w.a, w.every = nil, c.cfg.PollInterval
			w.rescanned(st, true)
			return true
		}
		return true
	}
	return true
}

// rescanned counts a scan that no notification asked for, and starts the
// timer of the next.
func (w *watcher) rescanned(st *Stats, overflow bool) {
	st.Rescans++
	w.c.cfg.Observer.Rescanned(overflow)
	if !w.rescan.Stop() {
		select {
		case <-w.rescan.C:
		default:
		}
	}
	w.rescan.Reset(w.every)
}

// ErrShutdownTimeout is returned by Drain and Watch when their context was
// cancelled and calls of the Caller were still running
// Config.ShutdownTimeout later: those calls were cancelled, and their
// claims left in processing/ with their msg_ids reserved, exactly as a
// kill leaves them: what a call started may still run (a request at its
// server, a process that left the command's process group), so the next
// consumer's recovery holds those msg_ids until the calls cannot be
// running, then calls them again (see Config.ShutdownTimeout). Nothing is
// wrong with the queue or the ledger; a program tells the operator that
// some calls were cut short.
var ErrShutdownTimeout = errors.New("shutdown timeout: calls in flight were cancelled")

// stopping is a run's graceful stop. The run's context stops the claiming;
// the ledger and the moves use work, never cancelled, so that what was
// claimed and started is finished; callCtx, the context of the Caller's
// calls, is cancelled only Config.ShutdownTimeout after the run's context
// (never, with a zero timeout), which bounds how long a stop waits for a
// slow or silent downstream.
type stopping struct {
	ctx     context.Context // the run's: cancelled, nothing more is claimed or started
	callCtx context.Context
	// cancelled counts the calls cut short by the timeout.
	cancelled atomic.Int64
	stop      func()
}

// newStopping arms the shutdown timeout on ctx, the run's context; stop
// disarms it when the run ends.
func (c *Consumer) newStopping(ctx, work context.Context) *stopping {
	callCtx, cancel := context.WithCancel(work)
	st := &stopping{ctx: ctx, callCtx: callCtx}
	var mu sync.Mutex
	var timer *time.Timer
	ended := false
	after := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !ended && c.cfg.ShutdownTimeout > 0 {
			timer = time.AfterFunc(c.cfg.ShutdownTimeout, cancel)
		}
	})
	st.stop = func() {
		after()
		mu.Lock()
		ended = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
	return st
}

// stopped reports whether the run was asked to stop: nothing more may be
// claimed, and no call started.
func (st *stopping) stopped() bool { return st.ctx.Err() != nil }

// abandoned reports whether a call's failure is only the shutdown timeout
// cutting it short: then it says nothing of the message.
func (st *stopping) abandoned(err error) bool {
	return err != nil && st.callCtx.Err() != nil
}

// err is the run's error for a stop that cancelled calls, nil otherwise.
func (st *stopping) err() error {
	if n := st.cancelled.Load(); n > 0 {
		return fmt.Errorf("%w: %d cut short, held for recovery: their claims are left in processing/ and their msg_ids reserved until the calls cannot be running, their attempts not counted",
			ErrShutdownTimeout, n)
	}
	return nil
}

// leaveCut ends a stop whose shutdown timeout cut calls short as a kill
// would: the claims of those calls stay in the session's directory with
// their call marks, and their msg_ids reserved, so that the next recovery
// holds them until the calls cannot be running (the session's calls lock
// is free, or the call bound has passed since), then calls them again.
// What was never called went back already (giveBack), and the claims
// waiting for a retry go back now; the session's lease is left to lapse,
// as a dead session's.
func (c *Consumer) leaveCut(s *queue.Session, lease *leaseKeeper, sd *stopping) error {
	if err := lease.err(); err != nil {
		return c.abandon(s, err)
	}
	if err := c.requeueDue(s, true); err != nil {
		return c.abandon(s, err)
	}
	c.mu.Lock()
	c.waiting = nil
	c.mu.Unlock()
	// Close keeps the directory, not empty, and releases its lock: the
	// next recovery finds the session dead at once.
	if err := s.Close(); err != nil && !errors.Is(err, syscall.ENOTEMPTY) {
		c.log.Warn("claims left for recovery", "session", s.ID(), "err", err)
	}
	c.log.Warn("stopping: calls cut short, held for recovery: their msg_ids stay reserved until the calls cannot be running",
		"calls", sd.cancelled.Load(), "session", s.ID())
	return sd.err()
}
