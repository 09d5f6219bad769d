package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spoolq/spool"
)

// This file holds the records spool fsck --repair writes back from the
// files of done/ and error/ (package fsck), and how it tells, among the
// files of done/ that carry one msg_id, which was the processed one.

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
	// At is the best estimate there is of when the file was recorded.
	// For done/ it must be the file's status change time (ctime), which
	// the move into done/ set just after its record committed: Fsck.RepairDone
	// takes the delivery of a msg_id with the earliest At for the
	// processed one.
	At time.Time
}

// RepairOutcome is what Fsck.RepairDone recorded for one file.
type RepairOutcome string

// The outcomes of Fsck.RepairDone.
const (
	// RepairedProcessed: a processed row was written for the file.
	RepairedProcessed RepairOutcome = "processed"
	// RepairedDuplicate: its msg_id already had a processed row (another
	// file's, recorded earlier), so a duplicate record was written.
	RepairedDuplicate RepairOutcome = "duplicate"
	// RepairedEarlier: the msg_id's processed row was one that a repair
	// wrote for a file recorded later than this one; this file got the
	// processed row, and the other file a duplicate record.
	RepairedEarlier RepairOutcome = "processed, the earliest delivery of its msg_id (the file recorded as processed before is a later one, now its duplicate)"
)

// repairClaim is the claim identity of a record fsck rebuilt: unique, and
// never one a consumer makes (those are "<session>/<ino>-<ctime>").
func repairClaim(stage string, f RepairedFile, at time.Time) string {
	return fmt.Sprintf("fsck:%s:%d:%s:%s", stage, f.Ino, f.Name, formatTime(at))
}

// RepairDone records, in one transaction, each valid message file of
// done/ that lost its record, with repaired_at = at; consumer names who
// repaired it. Of the files that carry one msg_id, the processed one is
// the first recorded, and the others are its duplicates (conflicts when
// their content differs from its):
//
//   - a file whose msg_id has no processed row gets one;
//   - a file whose msg_id has a processed row that a consumer wrote gets
//     a duplicate record: that row is the truth;
//   - a file whose msg_id has a processed row that a repair wrote takes
//     it over when it was recorded earlier (f.At, then the name: in one
//     batch the earlier claimed, in name order, was processed), and that
//     row's file becomes a duplicate; otherwise it is a duplicate.
//
// So the result does not depend on the order the files come in, nor on
// how they are split between calls: a repair that reads done/ in chunks,
// or is killed and run again, records what one call with every file would.
func (fk Fsck) RepairDone(ctx context.Context, files []RepairedFile, consumer string, at time.Time) ([]RepairOutcome, error) {
	if err := fk.db.open(); err != nil {
		return nil, err
	}
	out := make([]RepairOutcome, len(files))
	err := fk.db.inTx(ctx, func(tx *sql.Tx) error {
		for i, f := range files {
			m := f.Message
			if m == nil {
				return fmt.Errorf("%w: %s: no message", ErrBadDelivery, f.Name)
			}
			if err := fk.db.checkKey(&spool.Delivery{File: f.Name, Message: m}); err != nil {
				return err
			}
			claim := repairClaim("done", f, at)
			res, err := tx.ExecContext(ctx, fk.db.dialect.Rebind(fk.db.dialect.InsertNew(`INSERT INTO processed
    (msg_id, order_no, seq, amount, processed_at, file, content_hash, payload, claim, ino, repaired_at,
     schema_version, traceparent, tenant)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, "msg_id", "")), m.MsgID, nullString(m.OrderNo), nullInt(m.Seq), nullString(string(m.Amount)),
				formatTime(f.At), clean(f.Name), f.Hash, string(m.Raw), claim, nullIno(f.Ino), formatTime(at),
				nullString(m.Headers.Version), nullString(m.Headers.Trace), nullString(m.Headers.Tenant))
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
			if out[i], err = fk.db.repairDelivery(ctx, tx, f, claim, consumer, at); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fk.db.fail("repair records of done/", err)
	}
	return out, nil
}

// processedRow is the part of a processed row that repairDelivery
// compares a file with, and moves into deliveries when the file takes
// the row over.
type processedRow struct {
	at, file, hash, claim, payload string
	ino                            sql.NullInt64
	repaired                       bool
}

// repairDelivery records f, whose msg_id has a processed row already, as
// a duplicate of it, or takes the row over (see Fsck.RepairDone).
func (db *DB) repairDelivery(ctx context.Context, tx *sql.Tx, f RepairedFile, claim, consumer string, at time.Time) (RepairOutcome, error) {
	m := f.Message
	var (
		p        processedRow
		repaired sql.NullString
	)
	err := tx.QueryRowContext(ctx, db.dialect.Rebind(`SELECT processed_at, file, content_hash, claim, payload, ino, repaired_at
FROM processed WHERE msg_id = ?`), m.MsgID).Scan(&p.at, &p.file, &p.hash, &p.claim, &p.payload, &p.ino, &repaired)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("read processed %s: the row the insert found is gone", m.MsgID)
	}
	if err != nil {
		return "", fmt.Errorf("read processed %s: %w", m.MsgID, err)
	}
	p.repaired = repaired.Valid
	if !p.repaired || !recordedBefore(f, p) {
		if err := db.insertRepairedDuplicate(ctx, tx, repairedDuplicate{
			claim: claim, file: clean(f.Name), ino: nullIno(f.Ino), msgID: m.MsgID, hash: f.Hash,
			size: f.Size, at: formatTime(f.At), conflict: f.Hash != p.hash,
		}, consumer, at); err != nil {
			return "", err
		}
		return RepairedDuplicate, nil
	}
	// f was recorded first: the row's file becomes a duplicate of f.
	if err := db.insertRepairedDuplicate(ctx, tx, repairedDuplicate{
		claim: p.claim, file: p.file, ino: p.ino, msgID: m.MsgID, hash: p.hash,
		size: int64(len(p.payload)), at: p.at, conflict: f.Hash != p.hash,
	}, consumer, at); err != nil {
		return "", err
	}
	if _, err := tx.ExecContext(ctx, db.dialect.Rebind(`UPDATE processed
SET order_no = ?, seq = ?, amount = ?, processed_at = ?, file = ?, content_hash = ?, payload = ?, claim = ?, ino = ?, repaired_at = ?
WHERE msg_id = ?`), nullString(m.OrderNo), nullInt(m.Seq), nullString(string(m.Amount)), formatTime(f.At), clean(f.Name),
		f.Hash, string(m.Raw), claim, nullIno(f.Ino), formatTime(at), m.MsgID); err != nil {
		return "", fmt.Errorf("update processed %s: %w", m.MsgID, err)
	}
	// The duplicates conflict with the new processed content, not the old.
	if _, err := tx.ExecContext(ctx, db.dialect.Rebind(`UPDATE deliveries
SET conflict = CASE WHEN content_hash = ? THEN 0 ELSE 1 END
WHERE msg_id = ? AND outcome = 'duplicate'`), f.Hash, m.MsgID); err != nil {
		return "", fmt.Errorf("update conflicts of %s: %w", m.MsgID, err)
	}
	return RepairedEarlier, nil
}

// recordedBefore reports whether f was recorded before the file of the
// processed row p, which a repair wrote: by the time it reached done/
// (as stored: text order is time order), then by name, then by content.
func recordedBefore(f RepairedFile, p processedRow) bool {
	if c := strings.Compare(formatTime(f.At), p.at); c != 0 {
		return c < 0
	}
	if c := strings.Compare(clean(f.Name), p.file); c != 0 {
		return c < 0
	}
	return f.Hash < p.hash
}

// repairedDuplicate is a duplicate record that a repair writes.
type repairedDuplicate struct {
	claim, file, msgID, hash, at string
	ino                          any
	size                         int64
	conflict                     bool
}

func (db *DB) insertRepairedDuplicate(ctx context.Context, tx *sql.Tx, d repairedDuplicate, consumer string, at time.Time) error {
	conflict := 0
	if d.conflict {
		conflict = 1
	}
	if _, err := tx.ExecContext(ctx, db.dialect.Rebind(`INSERT INTO deliveries
    (claim, file, ino, consumer, msg_id, outcome, content_hash, size, at, repaired_at, conflict)
VALUES (?, ?, ?, ?, ?, 'duplicate', ?, ?, ?, ?, ?)`), d.claim, d.file, d.ino, consumer, d.msgID,
		d.hash, d.size, d.at, formatTime(at), conflict); err != nil {
		return fmt.Errorf("insert duplicate %s: %w", d.file, err)
	}
	return nil
}

// RepairError gives each file of error/ that has no dead-letter record one,
// with reason unknown and repaired_at = at, in one transaction.
func (fk Fsck) RepairError(ctx context.Context, files []RepairedFile, consumer string, at time.Time) error {
	if err := fk.db.open(); err != nil {
		return err
	}
	err := fk.db.inTx(ctx, func(tx *sql.Tx) error {
		for _, f := range files {
			if _, err := tx.ExecContext(ctx, fk.db.dialect.Rebind(`INSERT INTO deliveries
    (claim, file, ino, consumer, outcome, reason, detail, content_hash, size, at, repaired_at)
VALUES (?, ?, ?, ?, 'dead-letter', 'unknown', ?, ?, ?, ?, ?)`), repairClaim("error", f, at), clean(f.Name), nullIno(f.Ino),
				consumer, "recorded by spool fsck --repair: the ledger had no record of this dead letter",
				nullString(f.Hash), f.Size, formatTime(f.At), formatTime(at)); err != nil {
				return fmt.Errorf("insert dead letter %s: %w", clean(f.Name), err)
			}
		}
		return nil
	})
	if err != nil {
		return fk.db.fail("repair records of error/", err)
	}
	return nil
}
