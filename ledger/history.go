package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool"
)

// This file holds the queries behind the operator's history views: the
// dead-letter records of a file, the replay log, conflicting redeliveries,
// which msg_ids are processed (for a controlled replay) and the dedup
// window's prune. They are written once with ? placeholders, rebound for
// the dialect, and sort in Go wherever byte order matters, because the
// engines' collations differ.

// DeadLetterRecord is one dead-letter delivery with everything the ledger
// knows of it: what DeadLetter holds, plus the delivery's identity, its
// message key when it had one, and the handler's attempt history.
type DeadLetterRecord struct {
	DeadLetter
	// ID is the delivery's row id: the ledger's commit order, which holds
	// across hosts whose clocks disagree.
	ID int64
	// Ino is the claimed file's inode number; 0 when unknown.
	Ino uint64
	// MsgID is the message's key; empty when the message had no valid
	// one (not JSON, no key, a key of the wrong type), or was recorded
	// before a rejected message's key was.
	MsgID string
	// ContentHash is the hex SHA-256 of the content; empty when the file
	// was not read (not-regular, too-large, unreadable).
	ContentHash string
	// Size is the file's size in bytes as its claim found it.
	Size int64
	// Attempts is how many times the business handler was tried; 0 for a
	// message rejected before any handler ran (a poison message fails once,
	// at At).
	Attempts int
	// FirstFailure and LastFailure bound the handler's failed attempts;
	// zero when Attempts is 0.
	FirstFailure, LastFailure time.Time
}

// ReplayRecord is one row of the replay log.
type ReplayRecord struct {
	// ID is the row id: the order replays were recorded in.
	ID int64
	Replay
}

// Conflict is a duplicate delivery whose content differs from the processed
// row's: the same msg_id with another body, a producer bug or tampering.
type Conflict struct {
	// ID is the duplicate delivery's row id.
	ID    int64
	MsgID string
	// ProcessedFile and ProcessedHash are the processed row's file name and
	// content hash; both empty when that row has since been pruned.
	ProcessedFile, ProcessedHash string
	// DuplicateFile and DuplicateHash are the conflicting delivery's.
	DuplicateFile, DuplicateHash string
	// Consumer identifies the consumer that received the duplicate.
	Consumer string
	// At is when that consumer inspected the duplicate.
	At time.Time
}

// Prune says which rows Fsck.Prune removes.
type Prune struct {
	// Before is the edge of the dedup window: processed rows processed
	// before it, and processed and duplicate deliveries inspected before
	// it, are removed. Required.
	Before time.Time
	// KeepClaims lists the claims still in processing/ (queue.Dir.Claims):
	// their records are kept whatever their age, because recovery asks the
	// ledger about such a claim (I7) and must not find it forgotten. At
	// most MaxPruneKeep.
	KeepClaims []string
	// KeepInodes are the inodes of the files in inbox/, processing/,
	// error/ and held/ now: a batch file's progress row
	// (spool_batch_progress) is kept whatever its age while its file may
	// be read again from where it stopped (given back, set aside whole,
	// held); other progress rows go with the window, as processed rows
	// do. Any number.
	KeepInodes map[uint64]bool
	// DryRun counts what would be removed and removes nothing.
	DryRun bool
	// FilesBefore, when later than Before, is the latest status-change
	// time of a file of done/ whose row the prune removes and that stays
	// (a prune without --files): a file moved into done/ just after its
	// row was committed, before the edge, got there after it. Prune records
	// the later of the two as its horizon (Fsck.PruneHorizon), the files'
	// a little after it (the files changed before the horizon are kept).
	FilesBefore time.Time
}

// metaPruneHorizon is the meta row that holds the latest prune horizon.
const metaPruneHorizon = "prune_horizon"

// PruneHorizon returns the horizon of the prunes that removed rows: a file
// of done/ whose status changed (it was moved there) before it may have
// lost its processed or duplicate row to a prune; zero when no prune
// removed any. spool fsck never calls such a file's row lost, and fsck
// --repair never records it again: had its row been lost some other way,
// the prune would have removed it all the same (its processed_at is
// before the file's move), so the ledger is what the prune meant it to
// be. spool prune --files removes such files.
func (fk Fsck) PruneHorizon(ctx context.Context) (time.Time, error) {
	v, err := fk.db.metaValue(ctx, metaPruneHorizon, "read the prune horizon")
	if err != nil || v == "" {
		return time.Time{}, err
	}
	t, err := parseTime("meta."+metaPruneHorizon, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the prune horizon: %w", err)
	}
	return t, nil
}

// Pruned counts the rows Prune removed (or, in a dry run, would remove).
type Pruned struct {
	Processed  int64
	Deliveries int64
	// Outbox counts the outbox rows published before the window's edge
	// (spool relay): delivered, they are needed no more.
	Outbox int64
	// BatchFiles counts the batch files' progress rows last moved before
	// the window's edge (Prune.KeepInodes keeps some).
	BatchFiles int64
}

// Total is the number of rows removed.
func (p Pruned) Total() int64 { return p.Processed + p.Deliveries + p.Outbox + p.BatchFiles }

// MaxPruneKeep bounds Prune.KeepClaims: each claim is a bind parameter, and
// the engines cap how many one statement may carry.
const MaxPruneKeep = 10000

// ErrTooManyInFlight is wrapped by Prune when more files are claimed in
// processing/ than it can protect in one statement; prune again when the
// consumers are less busy.
var ErrTooManyInFlight = errors.New("too many claims in flight")

const deadLetterColumns = `id, file, ino, reason, field, detail, at, claim, consumer,
    msg_id, content_hash, size, attempts, first_failure, last_failure`

// scanDeadLetter reads one row of deadLetterColumns.
func scanDeadLetter(rows *sql.Rows) (DeadLetterRecord, error) {
	var (
		r                                       DeadLetterRecord
		reason, at                              string
		ino, size, attempts                     sql.NullInt64
		field, detail, msgID, hash, first, last sql.NullString
	)
	if err := rows.Scan(&r.ID, &r.File, &ino, &reason, &field, &detail, &at, &r.Claim, &r.Consumer,
		&msgID, &hash, &size, &attempts, &first, &last); err != nil {
		return DeadLetterRecord{}, err
	}
	r.Ino = uint64(ino.Int64) // stored with the same bits; see nullIno
	r.Reason = spool.Reason(reason)
	r.Field, r.Detail, r.MsgID, r.ContentHash = field.String, detail.String, msgID.String, hash.String
	r.Size, r.Attempts = size.Int64, int(attempts.Int64)
	var err error
	if r.At, err = parseTime("deliveries.at", at); err != nil {
		return DeadLetterRecord{}, err
	}
	if first.Valid {
		if r.FirstFailure, err = parseTime("deliveries.first_failure", first.String); err != nil {
			return DeadLetterRecord{}, err
		}
	}
	if last.Valid {
		if r.LastFailure, err = parseTime("deliveries.last_failure", last.String); err != nil {
			return DeadLetterRecord{}, err
		}
	}
	return r, nil
}

// History returns every dead-letter record of the file with inode
// ino, oldest first (in commit order). A file that was replayed and failed
// again has one record per failure; an inode the filesystem reused for
// another file has that file's records too, so callers match names (see
// report.Errors). Nil for ino 0 (unknown).
func (dls DeadLetters) History(ctx context.Context, ino uint64) ([]DeadLetterRecord, error) {
	if err := dls.db.open(); err != nil {
		return nil, err
	}
	if ino == 0 {
		return nil, nil
	}
	op := fmt.Sprintf("dead-letter history of inode %d", ino)
	// outcome = 'dead-letter' lets the engine use the partial index
	// deliveries_dead_letter_ino.
	return queryAll(ctx, dls.db, op, dls.db.dialect.Rebind(`SELECT `+deadLetterColumns+`
FROM deliveries
WHERE outcome = 'dead-letter' AND ino = ?
ORDER BY id`), []any{int64(ino)}, scanDeadLetter)
}

// List returns the replay log, oldest first: in the order the replays
// were recorded, which is their time order as long as the operators'
// clocks agree.
func (rl ReplayLog) List(ctx context.Context) ([]ReplayRecord, error) {
	return queryAll(ctx, rl.db, "list replays", rl.db.dialect.Rebind(`SELECT id, file, new_name, ino, by_user, note, at
FROM replays
ORDER BY id`), nil, func(rows *sql.Rows) (ReplayRecord, error) {
		var (
			r    ReplayRecord
			ino  sql.NullInt64
			note sql.NullString
			at   string
		)
		if err := rows.Scan(&r.ID, &r.File, &r.NewName, &ino, &r.By, &note, &at); err != nil {
			return r, err
		}
		r.Ino, r.Note = uint64(ino.Int64), note.String
		var err error
		r.At, err = parseTime("replays.at", at)
		return r, err
	})
}

// Conflicts returns the conflicting redeliveries, sorted by msg_id in byte
// order, then by the time of the duplicate, then by commit order.
func (ms Messages) Conflicts(ctx context.Context) ([]Conflict, error) {
	// LEFT JOIN: a conflict stays visible after its processed row was
	// pruned, with that side empty.
	out, err := queryAll(ctx, ms.db, "list conflicts", ms.db.dialect.Rebind(`SELECT d.id, d.msg_id, p.file, p.content_hash,
    d.file, d.content_hash, d.consumer, d.at
FROM deliveries d
LEFT JOIN processed p ON p.msg_id = d.msg_id
WHERE d.conflict = 1 AND d.outcome = 'duplicate'`), nil, func(rows *sql.Rows) (Conflict, error) {
		var (
			c                   Conflict
			pFile, pHash, dHash sql.NullString
			at                  string
		)
		if err := rows.Scan(&c.ID, &c.MsgID, &pFile, &pHash, &c.DuplicateFile, &dHash, &c.Consumer, &at); err != nil {
			return c, err
		}
		c.ProcessedFile, c.ProcessedHash, c.DuplicateHash = pFile.String, pHash.String, dHash.String
		var err error
		c.At, err = parseTime("deliveries.at", at)
		return c, err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Conflict) int {
		return cmp.Or(strings.Compare(a.MsgID, b.MsgID), a.At.Compare(b.At), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// ProcessedIDs returns which of ids have a row in processed, so that a
// replay can tell a dead letter whose message was processed meanwhile (it
// was sent again and succeeded) from one still to be done.
func (ms Messages) ProcessedIDs(ctx context.Context, ids []string) (map[string]bool, error) {
	at, err := ms.db.Fsck().RepairedAt(ctx, ids) // a key for each msg_id with a row
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(at))
	for id := range at {
		out[id] = true
	}
	return out, nil
}

// Prune removes the ledger rows past the dedup window: processed rows whose
// processed_at is before p.Before, processed and duplicate deliveries
// inspected before it, the outbox rows published before it, and the
// progress rows of the batch files whose progress last moved before it,
// in one transaction. It never removes dead-letter records (they are the
// history of the files in error/ and of their replays), the replay log,
// retry attempts, anything of a claim still in processing/
// (p.KeepClaims), the progress of a batch file that may be read again
// (p.KeepInodes), or the processed row of a message whose events are not
// all published yet (the relay sends its headers with them).
//
// What it costs: a msg_id whose processed row is gone is no longer known,
// so a redelivery of it is processed again, not absorbed as a duplicate;
// order-check no longer sees the pruned sequences; dups forgets the pruned
// duplicates; status and show forget the pruned batch files' counts.
func (fk Fsck) Prune(ctx context.Context, p Prune) (Pruned, error) {
	if err := fk.db.open(); err != nil {
		return Pruned{}, err
	}
	if p.Before.IsZero() {
		return Pruned{}, errors.New("prune: no window edge (Before is zero)")
	}
	if len(p.KeepClaims) > MaxPruneKeep {
		return Pruned{}, fmt.Errorf("prune: %w: %d files in processing/, at most %d", ErrTooManyInFlight, len(p.KeepClaims), MaxPruneKeep)
	}
	before := formatTime(p.Before)
	procWhere, procArgs, delWhere, delArgs := pruneWhere(p)
	var (
		res Pruned
		err error
	)
	if p.DryRun {
		res, err = fk.db.countPrune(ctx, before, p.KeepInodes, procWhere, procArgs, delWhere, delArgs)
	} else {
		horizon := p.Before
		if !p.FilesBefore.Before(horizon) {
			// After it: fsck keeps the files changed before the
			// horizon, and FilesBefore is a kept file's change time.
			horizon = p.FilesBefore.Add(time.Nanosecond)
		}
		res, err = fk.db.prune(ctx, horizon, before, p.KeepInodes, procWhere, procArgs, delWhere, delArgs)
	}
	if err != nil {
		return Pruned{}, fk.db.fail("prune before "+before, err)
	}
	return res, nil
}

func (db *DB) countPrune(ctx context.Context, before string, keep map[uint64]bool, procWhere string, procArgs []any, delWhere string, delArgs []any) (Pruned, error) {
	// Read-only: on SQLite it begins deferred and never takes the write
	// lock from consumers; one snapshot for both counts.
	tx, err := db.sql.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Pruned{}, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // read-only: nothing to commit
	var res Pruned
	if err := tx.QueryRowContext(ctx, db.dialect.Rebind("SELECT COUNT(*) FROM processed WHERE "+procWhere),
		procArgs...).Scan(&res.Processed); err != nil {
		return Pruned{}, fmt.Errorf("count processed: %w", err)
	}
	if err := tx.QueryRowContext(ctx, db.dialect.Rebind("SELECT COUNT(*) FROM deliveries WHERE "+delWhere),
		delArgs...).Scan(&res.Deliveries); err != nil {
		return Pruned{}, fmt.Errorf("count deliveries: %w", err)
	}
	if err := tx.QueryRowContext(ctx, db.dialect.Rebind("SELECT COUNT(*) FROM outbox WHERE "+outboxPruneWhere),
		before).Scan(&res.Outbox); err != nil {
		return Pruned{}, fmt.Errorf("count outbox: %w", err)
	}
	if res.BatchFiles, err = db.pruneBatchProgress(ctx, tx, before, keep, true); err != nil {
		return Pruned{}, err
	}
	return res, nil
}

func (db *DB) prune(ctx context.Context, horizon time.Time, before string, keep map[uint64]bool, procWhere string, procArgs []any, delWhere string, delArgs []any) (Pruned, error) {
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return Pruned{}, fmt.Errorf("begin: %w", err)
	}
	// After Commit, Rollback is a no-op; before it, the error that matters
	// is the one being returned.
	defer func() { _ = tx.Rollback() }()
	var res Pruned
	r, err := tx.ExecContext(ctx, db.dialect.Rebind("DELETE FROM processed WHERE "+procWhere), procArgs...)
	if err != nil {
		return Pruned{}, fmt.Errorf("delete processed: %w", err)
	}
	if res.Processed, err = r.RowsAffected(); err != nil {
		return Pruned{}, fmt.Errorf("delete processed: %w", err)
	}
	r, err = tx.ExecContext(ctx, db.dialect.Rebind("DELETE FROM deliveries WHERE "+delWhere), delArgs...)
	if err != nil {
		return Pruned{}, fmt.Errorf("delete deliveries: %w", err)
	}
	if res.Deliveries, err = r.RowsAffected(); err != nil {
		return Pruned{}, fmt.Errorf("delete deliveries: %w", err)
	}
	r, err = tx.ExecContext(ctx, db.dialect.Rebind("DELETE FROM outbox WHERE "+outboxPruneWhere), before)
	if err != nil {
		return Pruned{}, fmt.Errorf("delete outbox: %w", err)
	}
	if res.Outbox, err = r.RowsAffected(); err != nil {
		return Pruned{}, fmt.Errorf("delete outbox: %w", err)
	}
	if res.BatchFiles, err = db.pruneBatchProgress(ctx, tx, before, keep, false); err != nil {
		return Pruned{}, err
	}
	if res.Processed+res.Deliveries+res.BatchFiles > 0 {
		// In the transaction that forgets the rows: fsck must never see
		// them gone without the horizon that says so.
		if err := db.raiseHorizon(ctx, tx, horizon); err != nil {
			return Pruned{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return Pruned{}, fmt.Errorf("commit: %w", err)
	}
	// The order locks (outbox_order, migration 013) of the aggregates with
	// nothing left to publish: a lock row only matters while transactions
	// emit for its aggregate, and the next one makes it again. A statement
	// of its own, so that the prune above never waits for an emitter.
	if _, err := db.sql.ExecContext(ctx, `DELETE FROM outbox_order WHERE NOT EXISTS
    (SELECT 1 FROM outbox WHERE outbox.aggregate = outbox_order.aggregate AND outbox.published_at IS NULL)`); err != nil {
		return res, fmt.Errorf("delete outbox order locks: %w", err)
	}
	return res, nil
}

// pruneBatchPage is how many progress rows pruneBatchProgress reads
// and deletes at a time: a bound on its memory and on a statement's bind
// parameters, whatever the number of batch files ever consumed.
const pruneBatchPage = 500

// pruneBatchProgress deletes in tx (with count, counts) the batch files'
// progress rows last moved before the edge before, but those of a file
// whose inode keep holds, a page at a time in the order of their key,
// and returns how many. The inode is part of the row's key (its file
// identity, spool.BatchFileID), so which rows stay is decided here, not
// in SQL.
func (db *DB) pruneBatchProgress(ctx context.Context, tx *sql.Tx, before string, keep map[uint64]bool, count bool) (int64, error) {
	var (
		n     int64
		after string
		first = true
	)
	for {
		q := `SELECT file FROM spool_batch_progress WHERE at < ?`
		args := []any{before}
		if !first {
			q += ` AND file > ?`
			args = append(args, after)
		}
		page, err := batchProgressPage(ctx, tx, db.dialect.Rebind(q+` ORDER BY file LIMIT `+strconv.Itoa(pruneBatchPage)), args)
		if err != nil {
			return n, fmt.Errorf("list batch progress: %w", err)
		}
		var gone []any
		for _, f := range page {
			if id, ok := spool.ParseBatchFileID(f); !ok || !keep[id.Ino] {
				gone = append(gone, f)
			}
		}
		if count {
			n += int64(len(gone))
		} else if len(gone) > 0 {
			r, err := tx.ExecContext(ctx, db.dialect.Rebind(`DELETE FROM spool_batch_progress WHERE file IN (`+placeholders(len(gone))+`)`), gone...)
			if err != nil {
				return n, fmt.Errorf("delete batch progress: %w", err)
			}
			k, err := r.RowsAffected()
			if err != nil {
				return n, fmt.Errorf("delete batch progress: %w", err)
			}
			n += k
		}
		if len(page) < pruneBatchPage {
			return n, nil
		}
		after, first = page[len(page)-1], false
	}
}

// batchProgressPage reads one page of pruneBatchProgress, the rows
// closed before it deletes (one connection: a transaction's).
func batchProgressPage(ctx context.Context, tx *sql.Tx, q string, args []any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var page []string
	for rows.Next() {
		var f string
		if err := rows.Scan(&f); err != nil {
			return nil, err
		}
		page = append(page, f)
	}
	return page, errors.Join(rows.Err(), rows.Close())
}

// raiseHorizon records horizon as the prune horizon, in tx, unless a prune
// recorded a later one: an insert that skips an existing row, then an
// update that only raises it, each atomic, so that of two prunes at once
// the later horizon stays. The horizon is rounded up to the ledger's
// microseconds, so that no file changed before it reads as after it.
func (db *DB) raiseHorizon(ctx context.Context, tx *sql.Tx, horizon time.Time) error {
	if t := horizon.Truncate(time.Microsecond); !t.Equal(horizon) {
		horizon = t.Add(time.Microsecond)
	}
	v := formatTime(horizon)
	if _, err := tx.ExecContext(ctx, db.dialect.Rebind(db.dialect.InsertNew(`INSERT INTO meta (name, value) VALUES (?, ?)`, "name", "")),
		metaPruneHorizon, v); err != nil {
		return fmt.Errorf("record the prune horizon: %w", err)
	}
	// The layout sorts as text.
	if _, err := tx.ExecContext(ctx, db.dialect.Rebind(`UPDATE meta SET value = ? WHERE name = ? AND value < ?`),
		v, metaPruneHorizon, v); err != nil {
		return fmt.Errorf("record the prune horizon: %w", err)
	}
	return nil
}

// outboxPruneWhere is the outbox rows Prune removes: published before the
// window's edge. Unpublished and parked rows are never removed.
const outboxPruneWhere = "published_at IS NOT NULL AND published_at < ?"

// pruneWhere is the conditions of the rows Prune removes, on processed and
// on deliveries, with their arguments. They are written once and used to
// count (dry run), to delete, and to list the files of the rows
// (Fsck.EachPruneFile), so that each tells of exactly the rows a real run would
// remove from the same ledger.
func pruneWhere(p Prune) (procWhere string, procArgs []any, delWhere string, delArgs []any) {
	before := formatTime(p.Before)
	// A processed row whose handler emitted an event not yet published
	// stays: the relay reads the event's cause (the message's version,
	// trace and tenant) from it. The subquery reads only the unpublished
	// rows, through the outbox_pending index.
	procWhere, procArgs = "processed_at < ? AND msg_id NOT IN (SELECT msg_id FROM outbox WHERE published_at IS NULL AND msg_id IS NOT NULL)", []any{before}
	delWhere, delArgs = "outcome IN ('processed', 'duplicate') AND at < ?", []any{before}
	if len(p.KeepClaims) > 0 {
		keep := make([]any, len(p.KeepClaims))
		for i, c := range p.KeepClaims {
			keep[i] = c
		}
		in := " AND claim NOT IN (" + placeholders(len(keep)) + ")"
		procWhere += in
		procArgs = append(procArgs, keep...)
		delWhere += in
		delArgs = append(delArgs, keep...)
	}
	return procWhere, procArgs, delWhere, delArgs
}

// placeholders returns n comma-separated ? placeholders.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
