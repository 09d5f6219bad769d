package fsck

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/replay"
)

// This file holds the steps that tidy the queue's own state before the
// stages are compared: interrupted replays, stale temp files, dead claims.

func (c *checker) replays(ctx context.Context) (*finding, error) {
	f := c.newFinding(InterruptedReplay, false)
	if c.repair {
		done, err := replay.Resume(ctx, c.d, c.l)
		if err != nil {
			return nil, err
		}
		for _, fin := range done {
			c.o.Log(fmt.Sprintf("repaired replay %d by %s: finished, %d of its %d files replayed", fin.Intent.ID, fin.Intent.By, len(fin.Replays), len(fin.Intent.Items)))
		}
	}
	intents, err := c.l.Replays().Unfinished(ctx)
	if err != nil {
		return nil, err
	}
	if len(intents) > 0 && !c.repair {
		// A replay that holds the lock is running, not interrupted: it
		// finishes its own intent and any older one before it selects.
		// (Repair took the lock above, waiting for it to finish.)
		running, err := c.d.ReplayRunning()
		if err != nil {
			return nil, err
		}
		if running {
			intents = nil
		}
	}
	for _, in := range intents {
		f.add(fmt.Sprintf("replay %d by %s at %s, %d files, %s", in.ID, in.By, in.Created.Format(time.RFC3339), len(in.Items), in.State))
	}
	f.Text = fmt.Sprintf("%d replays were interrupted before they finished", f.Count)
	return f, nil
}

func (c *checker) deadClaims(ctx context.Context) (*finding, error) {
	f := c.newFinding(DeadClaims, false)
	if c.repair {
		cons, err := spool.NewConsumer(c.d, c.l.Consumer(), spool.Config{Contract: c.o.Contract, Lease: c.o.Lease})
		if err != nil {
			return nil, err
		}
		r, err := cons.RecoverAll(ctx)
		if err != nil {
			return nil, err
		}
		if r.Claims > 0 {
			c.o.Log(fmt.Sprintf("repaired processing/: recovered %d claims of dead consumers", r.Claims))
		}
		// A consumer without a Caller releases only on the calls lock's
		// proof (spool.ReleasedReservations): the others are left for a
		// consumer of the queue's handler, and listed (reservations).
		for _, rel := range r.Released {
			c.o.Log(fmt.Sprintf("repaired reservations: released the %d of session %s, whose calls lock is free (no process of its calls is left)", rel.Reservations, rel.Session))
		}
		for _, s := range r.CallsLocksRemoved {
			c.o.Log(fmt.Sprintf("repaired %s/%s: removed the calls lock of a consumer that is gone and holds no reservation", queue.CallsLockDir, s))
		}
	}
	claims, err := c.d.DeadClaims(c.o.Lease)
	if err != nil {
		return nil, err
	}
	for _, cl := range claims {
		f.add("processing/" + cl.Session + "/" + cl.Name)
	}
	f.Text = fmt.Sprintf("%d claims of dead consumers are still in processing/", f.Count)
	return f, nil
}

func (c *checker) temps(context.Context) (*finding, error) {
	f := c.newFinding(TempFiles, false)
	if c.repair {
		removed, err := c.d.RemoveAllStaleTemps()
		for _, t := range removed {
			c.o.Log(fmt.Sprintf("repaired %s: removed a stale temp file (%d bytes, %s old)", t.Path(), t.Size, time.Since(t.ModTime).Round(time.Second)))
		}
		if err != nil {
			return nil, err
		}
	}
	temps, err := c.d.Temps()
	if err != nil {
		return nil, err
	}
	live := 0
	for _, t := range temps {
		if t.Stale {
			f.add(t.Path())
		} else {
			live++
		}
	}
	f.Text = fmt.Sprintf("%d stale temp files of killed producers or consumers", f.Count)
	if live > 0 {
		f.Text += fmt.Sprintf(" (and %d being written now)", live)
	}
	return f, nil
}

// reservations lists the sessions gone from processing/ that still hold
// reservations, after deadClaims: with --repair, its recovery released
// those whose calls lock is free, the proof a consumer takes that no
// process of their calls is left (queue.Dir.ProbeCalls); the others may
// have a call running still, at a server or in a process of another
// kernel, and are left for a consumer to release at their call bound.
func (c *checker) reservations(ctx context.Context) (*finding, error) {
	f := c.newFinding(HeldReservations, true)
	owners, err := c.l.Consumer().ReservationOwners(ctx)
	if err != nil {
		return nil, err
	}
	for _, o := range owners {
		live, err := c.d.HasSession(o.Session)
		if err != nil {
			return nil, err
		}
		if live {
			continue
		}
		bound := "call bound not recorded"
		if o.CallBound > 0 {
			bound = "call bound " + o.CallBound.String()
		}
		f.add(fmt.Sprintf("session %s (%s)", o.Session, bound))
	}
	f.Text = fmt.Sprintf("%d consumer sessions that are gone still hold msg_ids reserved for their calls, which may still run: "+
		"a consumer with the queue's --post or --exec releases them once they cannot", f.Count)
	return f, nil
}

// callsLocks lists the calls locks of sessions gone that hold no
// reservation, which nothing needs any more; --repair removed them
// already, and said so (deadClaims' recovery).
func (c *checker) callsLocks(ctx context.Context) (*finding, error) {
	f := c.newFinding(StaleCallsLocks, true)
	locks, err := c.d.DeadCallsLocks()
	if err != nil {
		return nil, err
	}
	if len(locks) == 0 {
		f.Text = "0 calls locks of consumers that are gone"
		return f, nil
	}
	owners, err := c.l.Consumer().ReservationOwners(ctx)
	if err != nil {
		return nil, err
	}
	holds := map[string]bool{}
	for _, o := range owners {
		holds[o.Session] = true
	}
	for _, s := range locks {
		if !holds[s] {
			f.add(queue.CallsLockDir + "/" + s)
		}
	}
	f.Text = fmt.Sprintf("%d calls locks of consumers that are gone and hold no reservation (--repair removes them, as a consumer's start does)", f.Count)
	return f, nil
}
