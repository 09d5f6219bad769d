package fsck

import (
	"context"
	"fmt"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// This file holds the check of the queue's and the ledger's identities.

// identity returns the queue's and the ledger's record of the queue.
func (c *checker) identity(ctx context.Context) (qid, lid string, err error) {
	if qid, err = c.d.ID(); err != nil {
		return "", "", err
	}
	if lid, err = c.l.QueueID(ctx); err != nil {
		return "", "", err
	}
	return qid, lid, nil
}

// bind reports (and repairs) a queue and ledger that are not yet bound to
// each other. unknown counts the files of done/ and error/ the ledger had
// no record of before this run: a ledger that knew none of them is taken
// as this queue's.
func (c *checker) bind(ctx context.Context, qid, lid string, unknown int) (*finding, error) {
	switch {
	case qid != "" && qid == lid:
		return nil, nil
	case lid != "": // the queue lost its queue.id
		f := c.newFinding(NoQueueID, false)
		f.Count = 1
		f.Text = fmt.Sprintf("the queue has no %s, and the ledger belongs to queue %s", queue.IDFile, lid)
		if c.repair {
			if unknown > 0 {
				c.o.Log(fmt.Sprintf("not repaired: %s left missing, since the ledger did not know %d files of done/ and error/: it may be another queue's", queue.IDFile, unknown))
				return f, nil
			}
			if err := c.d.SetID(lid); err != nil {
				return nil, err
			}
			c.o.Log(fmt.Sprintf("repaired %s: wrote the ledger's queue identity %s back", queue.IDFile, lid))
		}
		return f, nil
	}
	f := c.newFinding(Unbound, true)
	f.Count = 1
	f.Text = "the queue and the ledger are not bound to each other yet (a queue made before queue identities); consume or fsck --repair binds them"
	if c.repair {
		id, err := ledger.Bind(ctx, c.l, c.d, ledger.BindNew)
		if err != nil {
			return nil, err
		}
		c.o.Log(fmt.Sprintf("repaired identity: bound the ledger to queue %s", id))
	}
	return f, nil
}
