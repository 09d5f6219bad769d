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

// DeadLetter is the record of one dead-lettered delivery, as reports show it
// next to the file sitting in error/ (I4).
type DeadLetter struct {
	// File is the name the message had in inbox/.
	File   string
	Reason spool.Reason
	// Field names the offending field; empty when there is none.
	Field string
	// Detail is the one-line explanation; empty when there is none.
	Detail string
	// At is when the consumer inspected the file.
	At time.Time
	// Claim is the claim identity the dead letter was recorded under.
	Claim string
	// Consumer identifies the consumer that dead-lettered it.
	Consumer string
}

// Stats counts what the ledger holds, for `spool status`.
type Stats struct {
	// Processed is the number of rows in processed: distinct valid msg_ids.
	Processed int64
	// Duplicates is the number of duplicate deliveries (not of distinct
	// msg_ids: a msg_id delivered three times counts twice).
	Duplicates int64
	// DeadLetters is the number of dead-letter deliveries, the sum of
	// DeadLettersByReason.
	DeadLetters int64
	// DeadLettersByReason counts dead letters per reason; reasons with none
	// are absent. Never nil.
	DeadLettersByReason map[spool.Reason]int64
}

// Replay records that an operator moved a dead letter from error/ back to
// inbox/, so that its second life can be traced to the first.
type Replay struct {
	// File is the name in error/.
	File string
	// NewName is the name it was given in inbox/ (a suffix is added on a
	// collision).
	NewName string
	// Ino is the file's inode number; 0 when unknown.
	Ino uint64
	// By names who replayed it (the OS user); required.
	By string
	// Note is the operator's free-text reason; optional.
	Note string
	// At is when it was replayed; zero means now.
	At time.Time
}

// Row is one row of the processed table.
type Row struct {
	MsgID string
	// OrderNo is empty and Seq 0 when the message had none (NULL).
	OrderNo string
	Seq     int64
	// Amount is exactly the text the message carried; empty when absent.
	Amount      spool.Amount
	ProcessedAt time.Time
	// File is the name the message had in inbox/.
	File string
	// ContentHash is the hex SHA-256 of Payload.
	ContentHash string
	// Payload is the message's full text.
	Payload string
	// Claim is the claim identity of the delivery that inserted the row.
	Claim string
	// Headers are the message's schema version, traceparent and tenant
	// (migration 017); empty when it carried none.
	Headers spool.MessageHeaders
}

// Duplicates returns the distinct msg_ids that were delivered again after
// being processed, in ascending byte order whatever the engine's collation,
// for `spool dups`.
func (db *DB) Duplicates(ctx context.Context) ([]string, error) {
	if err := db.open(); err != nil {
		return nil, err
	}
	rows, err := db.sql.QueryContext(ctx, db.q.duplicates)
	if err != nil {
		return nil, db.fail("list duplicates", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, db.fail("list duplicates", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, db.fail("list duplicates", err)
	}
	slices.Sort(ids)
	return ids, nil
}

// Stats counts processed rows, duplicates and dead letters by reason, from
// one consistent snapshot.
func (db *DB) Stats(ctx context.Context) (Stats, error) {
	if err := db.open(); err != nil {
		return Stats{}, err
	}
	st, err := db.stats(ctx)
	if err != nil {
		return Stats{}, db.fail("ledger stats", err)
	}
	return st, nil
}

func (db *DB) stats(ctx context.Context) (Stats, error) {
	st := Stats{DeadLettersByReason: map[spool.Reason]int64{}}
	// Read-only: on SQLite it begins deferred, so it never takes the write
	// lock away from consumers.
	tx, err := db.sql.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Stats{}, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // read-only: nothing to commit
	if err := tx.QueryRowContext(ctx, db.q.countProcessed).Scan(&st.Processed); err != nil {
		return Stats{}, err
	}
	rows, err := tx.QueryContext(ctx, db.q.countDeliveries)
	if err != nil {
		return Stats{}, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			outcome string
			reason  sql.NullString
			n       int64
		)
		if err := rows.Scan(&outcome, &reason, &n); err != nil {
			return Stats{}, err
		}
		switch spool.Outcome(outcome) {
		case spool.OutcomeDuplicate:
			st.Duplicates += n
		case spool.OutcomeDeadLetter:
			st.DeadLetters += n
			st.DeadLettersByReason[spool.Reason(reason.String)] += n
		}
	}
	if err := rows.Err(); err != nil {
		return Stats{}, err
	}
	return st, nil
}

// Record records that a dead letter was moved back to inbox/, durably
// before it returns, so a replay is never lost from the audit trail; a
// dead letter whose file was edited to a new inode before is retired from
// the dead-letter index with it, as ReplayLog.Finish does.
func (rl ReplayLog) Record(ctx context.Context, r Replay) error {
	if err := rl.db.open(); err != nil {
		return err
	}
	if r.File == "" || r.NewName == "" || r.By == "" {
		return fmt.Errorf("record replay: file, new name and by are required")
	}
	at := r.At
	if at.IsZero() {
		at = time.Now()
	}
	err := rl.db.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, rl.db.q.insertReplay,
			clean(r.File), clean(r.NewName), nullIno(r.Ino), clean(r.By), nullString(clean(r.Note)),
			formatTime(at)); err != nil {
			return err
		}
		return rl.db.retireReplaced(ctx, tx, ExitReplayed, r.By, at, []movedFile{{name: r.File, ino: r.Ino}})
	})
	if err != nil {
		return rl.db.fail("record replay of "+clean(r.File), err)
	}
	return nil
}

// Processed returns the processed row of msgID, and false when there is none.
func (db *DB) Processed(ctx context.Context, msgID string) (Row, bool, error) {
	if err := db.open(); err != nil {
		return Row{}, false, err
	}
	var (
		r               Row
		orderNo, amount sql.NullString
		seq             sql.NullInt64
		processedAt     string
	)
	err := db.sql.QueryRowContext(ctx, db.q.processed, msgID).Scan(
		&r.MsgID, &orderNo, &seq, &amount, &processedAt, &r.File, &r.ContentHash, &r.Payload, &r.Claim,
		&r.Headers.Version, &r.Headers.Trace, &r.Headers.Tenant)
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, false, nil
	}
	if err != nil {
		return Row{}, false, db.fail("processed row "+msgID, err)
	}
	r.OrderNo, r.Seq, r.Amount = orderNo.String, seq.Int64, spool.Amount(amount.String)
	if r.ProcessedAt, err = parseTime("processed.processed_at", processedAt); err != nil {
		return Row{}, false, fmt.Errorf("processed row %s: %w", msgID, err)
	}
	return r, true, nil
}
