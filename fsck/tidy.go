package fsck

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool"
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
		n, err := cons.Recover(ctx)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			c.o.Log(fmt.Sprintf("repaired processing/: recovered %d claims of dead consumers", n))
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
