package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool"
)

// This file holds what spool fsck reads from the ledger and writes back
// when it repairs it from the directories (package fsck).

// EachKnownFile calls fn with the inode and the recorded name of every
// file the ledger recorded as processed or as a duplicate: the files that
// may sit in done/. It streams: the rows are never all in memory. Rows
// recorded before inodes were are left out.
func (db *DB) EachKnownFile(ctx context.Context, fn func(ino uint64, file string) error) error {
	if err := db.open(); err != nil {
		return err
	}
	for _, q := range []string{
		`SELECT ino, file FROM processed WHERE ino IS NOT NULL`,
		`SELECT ino, file FROM deliveries WHERE outcome IN ('processed', 'duplicate') AND ino IS NOT NULL`,
	} {
		if err := db.eachFile(ctx, q, fn); err != nil {
			return err
		}
	}
	return nil
}

func (db *DB) eachFile(ctx context.Context, q string, fn func(ino uint64, file string) error) error {
	rows, err := db.sql.QueryContext(ctx, q)
	if err != nil {
		return db.fail("list recorded files", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			ino  int64
			file string
		)
		if err := rows.Scan(&ino, &file); err != nil {
			return db.fail("list recorded files", err)
		}
		// Stored with the same bits; see nullIno.
		if err := fn(uint64(ino), file); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return db.fail("list recorded files", err)
	}
	return nil
}

// EachPruneFile calls fn with the inode and the recorded name of every
// file the ledger recorded as processed or as a duplicate, as
// EachKnownFile does, and whether Prune with p removes the row that
// records it: spool prune --files removes a file of done/ only when a row
// that Prune removes records it and no row that it keeps does. It
// streams; rows recorded before inodes were are left out. p.DryRun is
// ignored.
func (db *DB) EachPruneFile(ctx context.Context, p Prune, fn func(ino uint64, file string, pruned bool) error) error {
	if err := db.open(); err != nil {
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
		if err := db.eachPruneFile(ctx, q.query, q.args, fn); err != nil {
			return err
		}
	}
	return nil
}

func (db *DB) eachPruneFile(ctx context.Context, q string, args []any, fn func(ino uint64, file string, pruned bool) error) error {
	rows, err := db.sql.QueryContext(ctx, db.dialect.Rebind(q), args...)
	if err != nil {
		return db.fail("list files to prune", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			ino    int64
			file   string
			pruned int
		)
		if err := rows.Scan(&ino, &file, &pruned); err != nil {
			return db.fail("list files to prune", err)
		}
		// Stored with the same bits; see nullIno.
		if err := fn(uint64(ino), file, pruned == 1); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return db.fail("list files to prune", err)
	}
	return nil
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
func (db *DB) EachProcessed(ctx context.Context, fn func(ProcessedFile) error) error {
	if err := db.open(); err != nil {
		return err
	}
	rows, err := db.sql.QueryContext(ctx, `SELECT msg_id, file, ino FROM processed`)
	if err != nil {
		return db.fail("list processed", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			p   ProcessedFile
			ino sql.NullInt64
		)
		if err := rows.Scan(&p.MsgID, &p.File, &ino); err != nil {
			return db.fail("list processed", err)
		}
		p.Ino = uint64(ino.Int64)
		if err := fn(p); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return db.fail("list processed", err)
	}
	return nil
}

// RepairedFile is a file in done/ or error/ that the ledger has no record
// of, as fsck --repair records it.
type RepairedFile struct {
	// Name is its name in its stage.
	Name string
	Ino  uint64
	Size int64
	// Hash is the hex SHA-256 of its content; empty when it was not read.
	Hash string
	// Message is the file parsed with the queue's contract (done/ only).
	Message *spool.Message
	// ModTime is the file's modification time: the best estimate there is
	// of when it was processed.
	ModTime time.Time
}

// RepairOutcome is what RepairDone recorded for one file.
type RepairOutcome string

// The outcomes of RepairDone.
const (
	// RepairedProcessed: a processed row was written for the file.
	RepairedProcessed RepairOutcome = "processed"
	// RepairedDuplicate: its msg_id already had a processed row (another
	// file's), so a duplicate record was written.
	RepairedDuplicate RepairOutcome = "duplicate"
)

// repairClaim is the claim identity of a record fsck rebuilt: unique, and
// never one a consumer makes (those are "<session>/<ino>-<ctime>").
func repairClaim(stage string, f RepairedFile, at time.Time) string {
	return fmt.Sprintf("fsck:%s:%d:%s:%s", stage, f.Ino, f.Name, formatTime(at))
}

// RepairDone records, in one transaction, a processed row for each valid
// message file of done/ that lost its row, marked with repaired_at = at;
// one whose msg_id another file's row already holds gets a duplicate
// record instead. consumer names who repaired it.
func (db *DB) RepairDone(ctx context.Context, files []RepairedFile, consumer string, at time.Time) ([]RepairOutcome, error) {
	if err := db.open(); err != nil {
		return nil, err
	}
	out := make([]RepairOutcome, len(files))
	err := db.inTx(ctx, func(tx *sql.Tx) error {
		for i, f := range files {
			m := f.Message
			if m == nil {
				return fmt.Errorf("%w: %s: no message", ErrBadDelivery, f.Name)
			}
			if err := db.checkKey(&spool.Delivery{File: f.Name, Message: m}); err != nil {
				return err
			}
			claim := repairClaim("done", f, at)
			res, err := tx.ExecContext(ctx, db.dialect.Rebind(db.dialect.InsertNew(`INSERT INTO processed
    (msg_id, order_no, seq, amount, processed_at, file, content_hash, payload, claim, ino, repaired_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, "msg_id", "")), m.MsgID, nullString(m.OrderNo), nullInt(m.Seq), nullString(string(m.Amount)),
				formatTime(f.ModTime), clean(f.Name), f.Hash, string(m.Raw), claim, nullIno(f.Ino), formatTime(at))
			if err != nil {
				return fmt.Errorf("insert processed %s: %w", clean(f.Name), err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("insert processed %s: %w", clean(f.Name), err)
			}
			if n == 1 {
				out[i] = RepairedProcessed
				continue
			}
			if _, err := tx.ExecContext(ctx, db.dialect.Rebind(`INSERT INTO deliveries
    (claim, file, ino, consumer, msg_id, outcome, content_hash, size, at, repaired_at)
VALUES (?, ?, ?, ?, ?, 'duplicate', ?, ?, ?, ?)`), claim, clean(f.Name), nullIno(f.Ino), consumer, m.MsgID,
				f.Hash, f.Size, formatTime(f.ModTime), formatTime(at)); err != nil {
				return fmt.Errorf("insert duplicate %s: %w", clean(f.Name), err)
			}
			out[i] = RepairedDuplicate
		}
		return nil
	})
	if err != nil {
		return nil, db.fail("repair records of done/", err)
	}
	return out, nil
}

// RepairError gives each file of error/ that has no dead-letter record one,
// with reason unknown and repaired_at = at, in one transaction.
func (db *DB) RepairError(ctx context.Context, files []RepairedFile, consumer string, at time.Time) error {
	if err := db.open(); err != nil {
		return err
	}
	err := db.inTx(ctx, func(tx *sql.Tx) error {
		for _, f := range files {
			if _, err := tx.ExecContext(ctx, db.dialect.Rebind(`INSERT INTO deliveries
    (claim, file, ino, consumer, outcome, reason, detail, content_hash, size, at, repaired_at)
VALUES (?, ?, ?, ?, 'dead-letter', 'unknown', ?, ?, ?, ?, ?)`), repairClaim("error", f, at), clean(f.Name), nullIno(f.Ino),
				consumer, "recorded by spool fsck --repair: the ledger had no record of this dead letter",
				nullString(f.Hash), f.Size, formatTime(f.ModTime), formatTime(at)); err != nil {
				return fmt.Errorf("insert dead letter %s: %w", clean(f.Name), err)
			}
		}
		return nil
	})
	if err != nil {
		return db.fail("repair records of error/", err)
	}
	return nil
}
