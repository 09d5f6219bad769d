package spool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/spoolq/spool/queue"
)

// leaseKeeper renews a session's lease every third of Config.Lease, in a
// goroutine of its own, and says whether the lease holds. The lease is the
// session directory's mtime (queue.Session.Touch), and, on a ledger that
// keeps leases (a LeaseLedger shared by hosts), the session's lease row,
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
	ll  LeaseLedger // nil: the directory's mtime alone
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
