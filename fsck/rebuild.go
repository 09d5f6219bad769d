package fsck

import (
	"context"
	"fmt"

	"github.com/spoolq/spool/ledger"
)

// This file holds the rebuild of a ledger that lost every record: Repair
// marks it before its first row and unmarks it once complete, and Bind
// refuses it in between (ledger.BeginRebuild), so that no consumer
// started meanwhile adopts the half-filled ledger and processes the
// redeliveries of files not yet recorded again.

// beginRebuild marks the ledger as being rebuilt, before Repair writes
// anything, when it is one to rebuild: marked already (a repair killed
// before it was complete), or bound to this queue or to none, holding no
// record at all while done/ or error/ holds files (deleted or emptied).
func (c *checker) beginRebuild(ctx context.Context) error {
	mark, err := c.l.Fsck().Rebuilding(ctx)
	if err != nil {
		return err
	}
	if mark == "" {
		qid, lid, err := c.identity(ctx)
		if err != nil {
			return err
		}
		if lid != "" && lid != qid {
			return nil // another queue's, or this queue lost its queue.id: run says so
		}
		empty, err := c.l.Empty(ctx)
		if err != nil || !empty {
			return err
		}
		history, err := c.d.HasHistory()
		if err != nil || !history {
			return err
		}
	}
	id, err := ledger.BeginRebuild(ctx, c.l, c.d, c.o.Consumer)
	if err != nil {
		return err
	}
	c.rebuilding = true
	if mark == "" {
		c.o.Log(fmt.Sprintf("rebuilding the ledger of queue %s from the directories: every command refuses it until this repair is complete", id))
	} else {
		c.o.Log(fmt.Sprintf("resuming the rebuild of the ledger of queue %s (begun %s)", id, mark))
	}
	return nil
}

// endRebuild unmarks a ledger that this Repair rebuilt, once every row
// is committed.
func (c *checker) endRebuild(ctx context.Context) error {
	if !c.rebuilding {
		return nil
	}
	if err := c.l.Fsck().EndRebuild(ctx); err != nil {
		return err
	}
	c.rebuilding = false
	c.o.Log("rebuilt the ledger: consumers may use it again")
	return nil
}

// rebuildMark reports a ledger marked as being rebuilt, for Check; nil
// when it is not, and during Repair, which completes the rebuild.
func (c *checker) rebuildMark(ctx context.Context) (*finding, error) {
	if c.repair {
		return nil, nil
	}
	mark, err := c.l.Fsck().Rebuilding(ctx)
	if err != nil || mark == "" {
		return nil, err
	}
	f := c.newFinding(Rebuilding, false)
	f.Count = 1
	f.Text = fmt.Sprintf("the ledger is being rebuilt from the directories (begun %s) and is not complete: a repair is running, or was killed; every command refuses the ledger until spool fsck --repair completes", mark)
	return f, nil
}
