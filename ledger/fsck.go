package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool"
)

// This file holds what spool fsck reads from the ledger (package fsck);
// what it writes back when it repairs it is in repair.go.

// Fsck is the ledger as spool fsck and spool prune see it (package fsck):
// the files it records, streamed for the checks against the queue's
// directories, what a repair writes back (the files found processed or
// lost, each msg_id's repair recorded once), the mark of a ledger being
// rebuilt, and the pruning of old history behind a recorded horizon, which
// never removes a row a recovery or a dedup still needs. Reached by
// DB.Fsck.
type Fsck struct{ db *DB }

// Fsck returns the ledger as fsck sees it.
func (db *DB) Fsck() Fsck { return Fsck{db} }

// EachKnownFile calls fn with the inode and the recorded name of every
// file the ledger recorded as processed or as a duplicate: the files that
// may sit in done/ (a batch file, which its records name "NAME#L17", is
// known by its progress row too: EachBatchFile). It streams: the rows are
// never all in memory. Rows recorded before inodes were are left out.
func (fk Fsck) EachKnownFile(ctx context.Context, fn func(ino uint64, file string) error) error {
	if err := fk.db.open(); err != nil {
		return err
	}
	for _, q := range []string{
		`SELECT ino, file FROM processed WHERE ino IS NOT NULL`,
		`SELECT ino, file FROM deliveries WHERE outcome IN ('processed', 'duplicate') AND ino IS NOT NULL`,
	} {
		if err := fk.db.eachFile(ctx, q, fn); err != nil {
			return err
		}
	}
	return nil
}

// EachBatchFile calls fn with the identity of every batch file the ledger
// kept progress of (spool_batch_progress), its name, inode, size and
// modification time when it was claimed, and its progress (the position
// after the last record committed, batch.Position as text). Every file a
// consumer finished has one, a file of which no record was processed too
// (all of them dead letters, or none at all), so that spool fsck knows it
// in done/, and can tell one that changed after its claim. It streams.
func (fk Fsck) EachBatchFile(ctx context.Context, fn func(id spool.BatchFileID, position string) error) error {
	if err := fk.db.open(); err != nil {
		return err
	}
	rows, err := fk.db.sql.QueryContext(ctx, `SELECT file, position FROM spool_batch_progress`)
	if err != nil {
		return fk.db.fail("list batch files", err)
	}
	defer rows.Close()
	for rows.Next() {
		var file, position string
		if err := rows.Scan(&file, &position); err != nil {
			return fk.db.fail("list batch files", err)
		}
		if id, ok := spool.ParseBatchFileID(file); ok {
			if err := fn(id, position); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fk.db.fail("list batch files", err)
	}
	return nil
}

// EachFile calls fn with the inode and the recorded name of
// every dead-letter record, streaming: fsck matches a file of error/ whose
// inode has no record (a copied queue) to them by name.
func (dls DeadLetters) EachFile(ctx context.Context, fn func(ino uint64, file string) error) error {
	if err := dls.db.open(); err != nil {
		return err
	}
	return dls.db.eachFile(ctx, `SELECT ino, file FROM deliveries WHERE outcome = 'dead-letter' AND ino IS NOT NULL`, fn)
}

func (db *DB) eachFile(ctx context.Context, q string, fn func(ino uint64, file string) error) error {
	type row struct {
		ino  int64
		file string
	}
	return eachRow(ctx, db, "list recorded files", q, nil,
		func(rows *sql.Rows) (r row, err error) { err = rows.Scan(&r.ino, &r.file); return r, err },
		// Stored with the same bits; see nullIno.
		func(r row) error { return fn(uint64(r.ino), r.file) })
}

// EachPruneFile calls fn with the inode and the recorded name of every
// file the ledger recorded as processed or as a duplicate, as
// Fsck.EachKnownFile does, and of every batch file it kept progress of,
// and whether Prune with p removes the row that records it: spool prune
// --files removes a file of done/ only when a row that Prune removes
// records it and no row that it keeps does. It streams; rows recorded
// before inodes were are left out. p.DryRun is ignored.
func (fk Fsck) EachPruneFile(ctx context.Context, p Prune, fn func(ino uint64, file string, pruned bool) error) error {
	if err := fk.db.open(); err != nil {
		return err
	}
	if p.Before.IsZero() {
		return errors.New("list files to prune: no window edge (Before is zero)")
	}
	if len(p.KeepClaims) > MaxPruneKeep {
		return fmt.Errorf("list files to prune: %w: %d files in processing/, at most %d", ErrTooManyInFlight, len(p.KeepClaims), MaxPruneKeep)
	}
	procWhere, procArgs, delWhere, delArgs := pruneWhere(p)
	for _, q := range []struct {
		query string
		args  []any
	}{
		{`SELECT ino, file, CASE WHEN ` + procWhere + ` THEN 1 ELSE 0 END FROM processed WHERE ino IS NOT NULL`, procArgs},
		{`SELECT ino, file, CASE WHEN ` + delWhere + ` THEN 1 ELSE 0 END FROM deliveries
    WHERE outcome IN ('processed', 'duplicate') AND ino IS NOT NULL`, delArgs},
	} {
		if err := fk.db.eachPruneFile(ctx, q.query, q.args, fn); err != nil {
			return err
		}
	}
	// A batch file is recorded by its progress row too (EachBatchFile),
	// the only row of one whose records were all dead letters, or none.
	return eachRow(ctx, fk.db, "list files to prune", fk.db.dialect.Rebind(`SELECT file, CASE WHEN at < ? THEN 1 ELSE 0 END FROM spool_batch_progress`),
		[]any{formatTime(p.Before)},
		func(rows *sql.Rows) (r pruneRow, err error) { err = rows.Scan(&r.file, &r.pruned); return r, err },
		func(r pruneRow) error {
			id, ok := spool.ParseBatchFileID(r.file)
			if !ok {
				return nil
			}
			return fn(id.Ino, id.Name, r.pruned == 1 && !p.KeepInodes[id.Ino])
		})
}

// pruneRow is a row of EachPruneFile's queries: a recorded file, and
// whether its row is past the window.
type pruneRow struct {
	ino    int64
	file   string
	pruned int
}

func (db *DB) eachPruneFile(ctx context.Context, q string, args []any, fn func(ino uint64, file string, pruned bool) error) error {
	return eachRow(ctx, db, "list files to prune", db.dialect.Rebind(q), args,
		func(rows *sql.Rows) (r pruneRow, err error) {
			err = rows.Scan(&r.ino, &r.file, &r.pruned)
			return r, err
		},
		// Stored with the same bits; see nullIno.
		func(r pruneRow) error { return fn(uint64(r.ino), r.file, r.pruned == 1) })
}

// ProcessedFile is a processed row as fsck sees it.
type ProcessedFile struct {
	MsgID string
	File  string
	// Ino is 0 for rows written before inodes were recorded.
	Ino uint64
}

// EachProcessed calls fn for every processed row, in no particular order,
// streaming: the rows are never all in memory.
func (fk Fsck) EachProcessed(ctx context.Context, fn func(ProcessedFile) error) error {
	if err := fk.db.open(); err != nil {
		return err
	}
	rows, err := fk.db.sql.QueryContext(ctx, `SELECT msg_id, file, ino FROM processed`)
	if err != nil {
		return fk.db.fail("list processed", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			p   ProcessedFile
			ino sql.NullInt64
		)
		if err := rows.Scan(&p.MsgID, &p.File, &ino); err != nil {
			return fk.db.fail("list processed", err)
		}
		p.Ino = uint64(ino.Int64)
		if err := fn(p); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fk.db.fail("list processed", err)
	}
	return nil
}

// RepairedAt returns, for each of ids that has a processed row, when a
// repair wrote that row (its repaired_at), or the zero time when a
// consumer did: fsck --repair tells by it a file of done/ whose msg_id a
// repair just recorded from another file (this file's record is missing
// too, and which of the two was processed is for Fsck.RepairDone to decide)
// from one whose msg_id a consumer recorded.
func (fk Fsck) RepairedAt(ctx context.Context, ids []string) (map[string]time.Time, error) {
	if err := fk.db.open(); err != nil {
		return nil, err
	}
	out := make(map[string]time.Time, len(ids))
	args := make([]any, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			args = append(args, id)
		}
	}
	for chunk := range slices.Chunk(args, rowsPerInsert) {
		rows, err := fk.db.sql.QueryContext(ctx, fk.db.dialect.Rebind(
			"SELECT msg_id, repaired_at FROM processed WHERE msg_id IN ("+placeholders(len(chunk))+")"), chunk...)
		if err != nil {
			return nil, fk.db.fail("look up processed msg_ids", err)
		}
		for rows.Next() {
			var (
				id string
				at sql.NullString
				t  time.Time
			)
			err := rows.Scan(&id, &at)
			if err == nil && at.Valid {
				t, err = parseTime("repaired_at", at.String)
			}
			if err != nil {
				rows.Close()
				return nil, fk.db.fail("look up processed msg_ids", err)
			}
			out[id] = t
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, fk.db.fail("look up processed msg_ids", err)
		}
	}
	return out, nil
}

// UnkeyedRows reports whether any processed row, or processed or
// duplicate delivery, was recorded without an inode (before inodes were
// recorded): fsck and prune cannot match such a row's file by key, so
// spool prune --files leaves the files that no keyed row records alone
// rather than take one of them for a file an earlier prune left.
func (fk Fsck) UnkeyedRows(ctx context.Context) (bool, error) {
	if err := fk.db.open(); err != nil {
		return false, err
	}
	var n int
	err := fk.db.sql.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM processed WHERE ino IS NULL LIMIT 1) p)
    + (SELECT COUNT(*) FROM (SELECT 1 FROM deliveries WHERE outcome IN ('processed', 'duplicate') AND ino IS NULL LIMIT 1) d)`).Scan(&n)
	if err != nil {
		return false, fk.db.fail("look for rows without inodes", err)
	}
	return n > 0, nil
}
