package spool

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

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
	err := r.c.recover(r.work, &st)
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
	err := r.c.recover(r.work, &st)
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
