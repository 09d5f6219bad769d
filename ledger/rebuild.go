package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/queue"
)

// A ledger rebuilt from the directories (spool fsck --repair on a
// deleted or emptied ledger) is bound to its queue and marked in meta
// before its first row, and the mark is removed only once the rebuild is
// complete. Bind refuses a marked ledger, so no consumer adopts a
// half-filled one: it would take the files not yet recorded for messages
// never seen, and process their redeliveries again. A rebuild that was
// killed leaves its mark, and the next repair finishes it.

// ErrRebuilding is wrapped by Bind when the ledger is being rebuilt from
// the directories, or a rebuild was killed before it was complete.
var ErrRebuilding = errors.New("ledger is being rebuilt from the directories and is not complete")

// metaRebuilding is the meta row that marks a ledger being rebuilt; its
// value says when and by whom the rebuild began.
const metaRebuilding = "rebuilding"

// Rebuilding returns what marks the ledger as being rebuilt (when and by
// whom the rebuild began), or "" when it is not.
func (fk Fsck) Rebuilding(ctx context.Context) (string, error) {
	return fk.db.metaValue(ctx, metaRebuilding, "read the rebuild mark")
}

// BeginRebuild marks the ledger as being rebuilt by by, and then binds it
// to the queue d (writing d's queue.id first if it has none), before the
// rebuild writes any row: from then on Bind refuses it until Fsck.EndRebuild.
// It returns the queue's identity. On a ledger already marked it keeps the
// first mark and completes the binding, so a killed rebuild is resumed.
// It fails with ErrOtherQueue when the ledger belongs to another queue.
func BeginRebuild(ctx context.Context, db *DB, d *queue.Dir, by string) (string, error) {
	mark, err := db.Fsck().Rebuilding(ctx)
	if err != nil {
		return "", fmt.Errorf("begin rebuild: %w", err)
	}
	if mark == "" {
		// The mark before the binding: a ledger bound to the queue with no
		// record is refused by a writer anyway (checkHistory), and one
		// with records was marked before its first.
		if _, err := db.sql.ExecContext(ctx, db.dialect.Rebind(`INSERT INTO meta (name, value) VALUES (?, ?)`),
			metaRebuilding, formatTime(time.Now())+" by "+by); err != nil {
			return "", fmt.Errorf("begin rebuild: %w", db.fail("mark the ledger", err))
		}
	}
	qid, err := d.EnsureID()
	if err != nil {
		return "", fmt.Errorf("begin rebuild: %w", err)
	}
	got, err := db.bindQueueID(ctx, qid, AuditEntry{}) // audited as the repair that rebuilds it
	if err != nil {
		return "", fmt.Errorf("begin rebuild: %w", err)
	}
	if got != qid {
		return "", fmt.Errorf("begin rebuild: %w: the ledger is queue %s's, and %s is queue %s", ErrOtherQueue, got, d.Path(), qid)
	}
	return qid, nil
}

// EndRebuild removes the mark of BeginRebuild, once every row the rebuild
// writes is committed: consumers may use the ledger again.
func (fk Fsck) EndRebuild(ctx context.Context) error {
	if err := fk.db.open(); err != nil {
		return err
	}
	if _, err := fk.db.sql.ExecContext(ctx, fk.db.dialect.Rebind(`DELETE FROM meta WHERE name = ?`), metaRebuilding); err != nil {
		return fmt.Errorf("end rebuild: %w", fk.db.fail("unmark the ledger", err))
	}
	return nil
}

// checkRebuilding fails with ErrRebuilding when the ledger is marked as
// being rebuilt. Bind calls it after every other read: a rebuild marks the
// ledger before its first row, so a Bind that saw any row of it sees the
// mark here.
func checkRebuilding(ctx context.Context, db *DB) error {
	mark, err := db.Fsck().Rebuilding(ctx)
	if err != nil {
		return fmt.Errorf("bind ledger: %w", err)
	}
	if mark != "" {
		return fmt.Errorf("%w (begun %s)", ErrRebuilding, mark)
	}
	return nil
}
