package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A discard (spool discard) is recorded as a batch with every file it
// selected before the first file goes, so that one killed at any instant
// can be finished and so that fsck and show know a file that left error/
// this way was discarded, not lost: see package discard and
// docs/DESIGN.md, "Discard". The batch goes through the states of a replay
// intent: IntentPending, IntentStaged, IntentDone.

// DiscardLog is the ledger's discards of dead letters (tables
// discard_batches and discards): a batch committed with every file
// it will take before the first one moves, so that a killed discard is
// finished, never redone or lost, and each file's outcome once it is
// done. A batch's files never change after it is committed. Reached by
// DB.Discards.
type DiscardLog struct{ db *DB }

// Discards returns the ledger's discard log.
func (db *DB) Discards() DiscardLog { return DiscardLog{db} }

// DiscardOutcome is what became of one file of a discard, set when its
// batch is done.
type DiscardOutcome string

// The outcomes of a discarded file.
const (
	// DiscardDeleted: the file was unlinked.
	DiscardDeleted DiscardOutcome = "deleted"
	// DiscardMoved: the file was moved to the batch's ToDir, as NewName.
	DiscardMoved DiscardOutcome = "moved"
	// DiscardMissing: the file was gone from error/ (removed by hand,
	// replayed) before the discard reached it; nothing was done to it.
	DiscardMissing DiscardOutcome = "missing"
)

// DiscardBatch is one run of spool discard.
type DiscardBatch struct {
	ID int64
	// By is who discarded (the OS user, or --by); Note is why.
	By, Note string
	Created  time.Time
	// State is IntentPending, IntentStaged or IntentDone.
	State string
	// ToDir is the directory the files were moved to; empty when they
	// were deleted.
	ToDir string
	// Finished is when the batch was done; zero before.
	Finished time.Time
	Items    []DiscardItem
}

// DiscardItem is one file of a discard batch.
type DiscardItem struct {
	// Idx numbers the item within its batch; it names the file's staging
	// name in error/.
	Idx int
	// File is the dead letter's exact name in error/ when the discard
	// began; Ino its inode number, which every rename keeps.
	File string
	Ino  uint64
	// MsgID is the message's key when known; Reason its dead-letter
	// reason (report.ReasonUnknown for a file without a record).
	MsgID, Reason string
	// ContentHash is the hex SHA-256 of the file's body; empty for a file
	// that is not a regular file. Size is its size in bytes.
	ContentHash string
	Size        int64
	// Outcome and NewName are set when the batch is done (DiscardLog.Finish);
	// NewName is the file's name in ToDir for DiscardMoved.
	Outcome DiscardOutcome
	NewName string
}

// beginDiscard commits a discard batch, in state pending, with its items,
// as the move of a task's chunk that link says (Tasks.BeginChunk,
// Tasks.Start), and returns its id. by and note are required; toDir is
// empty for a discard that deletes. Nothing is done to any file: the
// caller stages them next (DiscardLog.Stage), then finishes the batch
// (DiscardLog.Finish).
func (db *DB) beginDiscard(ctx context.Context, link *taskLink, by, note, toDir string, at time.Time, items []DiscardItem) (int64, error) {
	if err := db.open(); err != nil {
		return 0, err
	}
	if by == "" || strings.TrimSpace(note) == "" {
		return 0, errors.New("begin discard: by and note are required")
	}
	var id int64
	err := db.inTx(ctx, func(tx *sql.Tx) error {
		task, err := db.link(ctx, tx, link, at)
		if err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, db.dialect.Rebind(`INSERT INTO discard_batches (by_user, note, created_at, state, to_dir, task_id)
VALUES (?, ?, ?, 'pending', ?, ?) RETURNING id`), clean(by), clean(note), formatTime(at), nullString(clean(toDir)), task).Scan(&id); err != nil {
			return fmt.Errorf("insert batch: %w", err)
		}
		ins, err := tx.PrepareContext(ctx, db.dialect.Rebind(`INSERT INTO discards (batch_id, idx, file, ino, msg_id, reason, content_hash, size)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`))
		if err != nil {
			return fmt.Errorf("insert items: %w", err)
		}
		defer ins.Close()
		for _, it := range items {
			// file is kept exact, not cleaned: the discard finds the file by it.
			if _, err := ins.ExecContext(ctx, id, it.Idx, it.File, nullIno(it.Ino), nullString(it.MsgID), clean(it.Reason),
				nullString(it.ContentHash), it.Size); err != nil {
				return fmt.Errorf("insert item %s: %w", clean(it.File), err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, db.fail("begin discard", err)
	}
	return id, nil
}

// Stage marks batch id staged: every one of its files now sits in
// error/ under its staging name, but for the items of missing (by Idx),
// which were gone from error/ when the discard reached them and are
// recorded DiscardMissing, in the same transaction. A batch in another
// state is left as it is.
func (dl DiscardLog) Stage(ctx context.Context, id int64, missing []int) error {
	if err := dl.db.open(); err != nil {
		return err
	}
	err := dl.db.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, dl.db.dialect.Rebind(`UPDATE discard_batches SET state = 'staged' WHERE id = ? AND state = 'pending'`), id)
		if err != nil {
			return fmt.Errorf("mark staged: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // staged by another run meanwhile, or unknown
		}
		for _, idx := range missing {
			if _, err := tx.ExecContext(ctx, dl.db.dialect.Rebind(`UPDATE discards SET outcome = 'missing' WHERE batch_id = ? AND idx = ?`), id, idx); err != nil {
				return fmt.Errorf("record item %d missing: %w", idx, err)
			}
		}
		return nil
	})
	if err != nil {
		return dl.db.fail(fmt.Sprintf("stage discard %d", id), err)
	}
	return nil
}

// Finish marks batch id done and records each item's Outcome and
// NewName (items matched by Idx), in one transaction, in which the dead
// letters whose file was edited to a new inode before it was discarded
// are retired from the dead-letter index (retireReplaced). A batch already
// done is left as it is: of two runs finishing it, the second records
// nothing.
func (dl DiscardLog) Finish(ctx context.Context, id int64, items []DiscardItem, at time.Time) error {
	if err := dl.db.open(); err != nil {
		return err
	}
	err := dl.db.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, dl.db.dialect.Rebind(`UPDATE discard_batches SET state = 'done', finished_at = ?
WHERE id = ? AND state <> 'done'`), formatTime(at), id)
		if err != nil {
			return fmt.Errorf("mark done: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // finished by another run meanwhile, or unknown
		}
		upd, err := tx.PrepareContext(ctx, dl.db.dialect.Rebind(`UPDATE discards SET outcome = ?, new_name = ? WHERE batch_id = ? AND idx = ?`))
		if err != nil {
			return fmt.Errorf("record outcomes: %w", err)
		}
		defer upd.Close()
		for _, it := range items {
			switch it.Outcome {
			case DiscardDeleted, DiscardMoved, DiscardMissing:
			default:
				return fmt.Errorf("item %d: outcome %q", it.Idx, it.Outcome)
			}
			if _, err := upd.ExecContext(ctx, string(it.Outcome), nullString(clean(it.NewName)), id, it.Idx); err != nil {
				return fmt.Errorf("record outcome of %s: %w", clean(it.File), err)
			}
		}
		if err := dl.db.retireDiscarded(ctx, tx, id, at); err != nil {
			return err
		}
		done, missing := 0, 0
		for _, it := range items {
			if it.Outcome == DiscardMissing {
				missing++
			} else {
				done++
			}
		}
		return dl.db.countChunk(ctx, tx, "discard_batches", id, done, missing, at)
	})
	if err != nil {
		return dl.db.fail(fmt.Sprintf("finish discard %d", id), err)
	}
	return nil
}

// retireDiscarded retires, in tx, the dead letters whose file was edited to
// a new inode before batch id discarded it (retireReplaced).
func (db *DB) retireDiscarded(ctx context.Context, tx *sql.Tx, id int64, at time.Time) error {
	var by string
	if err := tx.QueryRowContext(ctx, db.dialect.Rebind(`SELECT by_user FROM discard_batches WHERE id = ?`), id).Scan(&by); err != nil {
		return fmt.Errorf("read batch: %w", err)
	}
	rows, err := tx.QueryContext(ctx, db.dialect.Rebind(`SELECT file, ino FROM discards WHERE batch_id = ?`), id)
	if err != nil {
		return fmt.Errorf("read items: %w", err)
	}
	var moved []movedFile
	for rows.Next() {
		var (
			m   movedFile
			ino sql.NullInt64
		)
		if err := rows.Scan(&m.name, &ino); err != nil {
			rows.Close()
			return fmt.Errorf("read items: %w", err)
		}
		m.ino = uint64(ino.Int64) // stored with the same bits; see nullIno
		moved = append(moved, m)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("read items: %w", err)
	}
	return db.retireReplaced(ctx, tx, ExitDiscarded, by, at, moved, id)
}

// Unfinished returns the batches not yet done, oldest first, with
// their items in idx order.
func (dl DiscardLog) Unfinished(ctx context.Context) ([]DiscardBatch, error) {
	return dl.db.discardBatches(ctx, `WHERE state <> 'done'`, nil)
}

// DiscardStats counts what the ledger records of discards: Files, the
// files of finished batches that were deleted or moved; Batches, the
// finished batches; Pending, the batches not yet finished.
type DiscardStats struct {
	Files, Batches, Pending int
}

// Counts returns the DiscardStats of the ledger.
func (dl DiscardLog) Counts(ctx context.Context) (DiscardStats, error) {
	var s DiscardStats
	if err := dl.db.open(); err != nil {
		return s, err
	}
	err := dl.db.sql.QueryRowContext(ctx, `SELECT
    (SELECT COUNT(*) FROM discards d JOIN discard_batches b ON b.id = d.batch_id
     WHERE b.state = 'done' AND d.outcome IN ('deleted', 'moved')),
    (SELECT COUNT(*) FROM discard_batches WHERE state = 'done'),
    (SELECT COUNT(*) FROM discard_batches WHERE state <> 'done')`).Scan(&s.Files, &s.Batches, &s.Pending)
	if err != nil {
		return s, dl.db.fail("count discards", err)
	}
	return s, nil
}

// Of returns the discard batches, oldest first, that hold a file
// of the message msgID (when not empty) or, among files without a known
// msg_id, a file of one of the names in files; each batch carries only
// those items.
func (dl DiscardLog) Of(ctx context.Context, msgID string, files []string) ([]DiscardBatch, error) {
	var (
		conds []string
		args  []any
	)
	if msgID != "" {
		conds = append(conds, "d.msg_id = ?")
		args = append(args, msgID)
	}
	if len(files) > 0 {
		conds = append(conds, "(d.msg_id IS NULL AND d.file IN (?"+strings.Repeat(", ?", len(files)-1)+"))")
		for _, f := range files {
			args = append(args, f)
		}
	}
	if len(conds) == 0 {
		return nil, nil
	}
	return dl.db.discardBatches(ctx, `WHERE id IN (SELECT d.batch_id FROM discards d WHERE `+strings.Join(conds, " OR ")+`)`,
		&itemFilter{where: " AND (" + strings.Join(conds, " OR ") + ")", args: args}, args...)
}

// itemFilter narrows the items read with a batch.
type itemFilter struct {
	where string
	args  []any
}

// discardBatches reads the batches a WHERE clause on discard_batches
// selects, oldest first, with their items (those of filter, or all).
func (db *DB) discardBatches(ctx context.Context, where string, filter *itemFilter, args ...any) ([]DiscardBatch, error) {
	if err := db.open(); err != nil {
		return nil, err
	}
	const op = "list discards"
	out, err := queryAll(ctx, db, op, db.dialect.Rebind(`SELECT id, by_user, note, created_at, state, to_dir, finished_at
FROM discard_batches `+where+` ORDER BY id`), args, func(rows *sql.Rows) (DiscardBatch, error) {
		var (
			b               DiscardBatch
			toDir, finished sql.NullString
			created         string
		)
		if err := rows.Scan(&b.ID, &b.By, &b.Note, &created, &b.State, &toDir, &finished); err != nil {
			return b, err
		}
		b.ToDir = toDir.String
		var err error
		if b.Created, err = parseTime("discard_batches.created_at", created); err == nil && finished.Valid {
			b.Finished, err = parseTime("discard_batches.finished_at", finished.String)
		}
		return b, err
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Items, err = db.discardItems(ctx, out[i].ID, filter); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (db *DB) discardItems(ctx context.Context, id int64, filter *itemFilter) ([]DiscardItem, error) {
	op := fmt.Sprintf("list items of discard %d", id)
	q := `SELECT idx, file, ino, msg_id, reason, content_hash, size, outcome, new_name FROM discards d WHERE batch_id = ?`
	args := []any{id}
	if filter != nil {
		q += filter.where
		args = append(args, filter.args...)
	}
	rows, err := db.sql.QueryContext(ctx, db.dialect.Rebind(q+` ORDER BY idx`), args...)
	if err != nil {
		return nil, db.fail(op, err)
	}
	defer rows.Close()
	var out []DiscardItem
	for rows.Next() {
		var (
			it                            DiscardItem
			ino                           sql.NullInt64
			msgID, hash, outcome, newName sql.NullString
		)
		if err := rows.Scan(&it.Idx, &it.File, &ino, &msgID, &it.Reason, &hash, &it.Size, &outcome, &newName); err != nil {
			return nil, db.fail(op, err)
		}
		it.Ino, it.MsgID, it.ContentHash = uint64(ino.Int64), msgID.String, hash.String
		it.Outcome, it.NewName = DiscardOutcome(outcome.String), newName.String
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, db.fail(op, err)
	}
	return out, nil
}
