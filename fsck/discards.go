package fsck

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/discard"
)

// This file holds the steps for the dead letters discarded on purpose
// (spool discard): an interrupted discard is finished, and the finished
// ones are counted, so that a file gone from error/ that way is known as
// discarded, not lost. A ledger rebuilt from the directories (the rebuild
// of Repair) cannot know of them: the files are gone.

func (c *checker) discards(ctx context.Context) (*finding, error) {
	f := c.newFinding(InterruptedDiscard, false)
	if c.repair {
		done, err := discard.Resume(ctx, c.d, c.l)
		if err != nil {
			return nil, err
		}
		for _, b := range done {
			c.o.Log(fmt.Sprintf("repaired discard %d by %s: finished, %d files", b.ID, b.By, len(b.Items)))
		}
	}
	batches, err := c.l.Discards().Unfinished(ctx)
	if err != nil {
		return nil, err
	}
	if len(batches) > 0 && !c.repair {
		// A discard that holds the lock is running, not interrupted.
		running, err := c.d.ReplayRunning()
		if err != nil {
			return nil, err
		}
		if running {
			batches = nil
		}
	}
	for _, b := range batches {
		f.add(fmt.Sprintf("discard %d by %s at %s, %d files, %s", b.ID, b.By, b.Created.Format(time.RFC3339), len(b.Items), b.State))
	}
	f.Text = fmt.Sprintf("%d discards were interrupted before they finished (their files are still in error/, some under hidden names .spool-discard-*)", f.Count)
	return f, nil
}

// discarded counts the dead letters discarded on purpose: informational.
func (c *checker) discarded(ctx context.Context) (*finding, error) {
	f := c.newFinding(Discarded, true)
	s, err := c.l.Discards().Counts(ctx)
	if err != nil {
		return nil, err
	}
	f.Count = s.Files
	f.Text = fmt.Sprintf("%d dead letters were discarded on purpose, in %d discards (spool discard; not missing: see spool show)", s.Files, s.Batches)
	return f, nil
}
