package spool

import (
	"context"
	"sync"
	"time"

	"github.com/spoolq/spool/queue"
)

// leaseKeeper renews a session's lease (queue.Session.Touch) every third
// of Config.Lease, in a goroutine of its own, and says whether the lease
// holds. While a renewal fails, no new claim is made and no new call
// started (wait): consumers on other hosts take over the claims of a
// session whose lease has lapsed, so a session that cannot renew must not
// go on taking work it may lose, above all calls, which another host may
// then make again at once. The claims and calls already made finish. The
// renewal is retried every second or so, and claims and calls resume as
// soon as one succeeds. (This is the start of fencing: a session that was
// cut off longer than the lease may still settle calls whose claims were
// taken over meanwhile; the ledger does not refuse them yet.)
type leaseKeeper struct {
	s   *queue.Session
	c   *Consumer
	mu  sync.Mutex
	ok  chan struct{} // closed while the last renewal succeeded
	end chan struct{} // closed by stop
	wg  sync.WaitGroup
}

// keepLease starts renewing s's lease; stop ends it.
func (c *Consumer) keepLease(s *queue.Session) *leaseKeeper {
	k := &leaseKeeper{s: s, c: c, ok: make(chan struct{}), end: make(chan struct{})}
	close(k.ok) // Join made the lease fresh
	k.wg.Add(1)
	go k.loop()
	return k
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
		if err := k.s.Touch(); err != nil {
			k.lost(err)
			t.Reset(retry)
			continue
		}
		k.renewed()
		t.Reset(every)
	}
}

// lost holds new claims and calls after a failed renewal.
func (k *leaseKeeper) lost(err error) {
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

// renewed lets claims and calls go on after a successful renewal.
func (k *leaseKeeper) renewed() {
	k.mu.Lock()
	defer k.mu.Unlock()
	select {
	case <-k.ok:
	default:
		close(k.ok)
		k.c.log.Info("lease renewed: claims and calls resume", "session", k.s.ID())
	}
}

// wait returns nil once the lease holds; ctx's error if ctx is done first,
// errStopScan if stop is closed first.
func (k *leaseKeeper) wait(ctx context.Context, stop <-chan struct{}) error {
	k.mu.Lock()
	ok := k.ok
	k.mu.Unlock()
	select {
	case <-ok:
		return nil
	default:
	}
	select {
	case <-ok:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return errStopScan
	}
}

// stop ends the renewals and waits for the goroutine to return.
func (k *leaseKeeper) stop() {
	close(k.end)
	k.wg.Wait()
}
