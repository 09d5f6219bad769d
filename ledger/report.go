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

// Messages is the ledger's record of the messages themselves as reports
// read it (tables processed, deliveries, attempts): counts, duplicates
// and conflicts, what became of a msg_id or a file (its story), the
// msg_ids waiting for a retry, and the order check of processed rows.
// It only reads, except Messages.FlushRetries, which makes waiting retries due at
// once and never records an outcome. Reached by DB.Messages.
type Messages struct{ db *DB }

// Messages returns the ledger's record of messages for reports.
func (db *DB) Messages() Messages { return Messages{db} }

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
func (ms Messages) Duplicates(ctx context.Context) ([]string, error) {
	ids, err := queryAll(ctx, ms.db, "list duplicates", ms.db.q.duplicates, nil, func(rows *sql.Rows) (string, error) {
		var id string
		err := rows.Scan(&id)
		return id, err
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
}

// Stats counts processed rows, duplicates and dead letters by reason, from
// one consistent snapshot.
func (ms Messages) Stats(ctx context.Context) (Stats, error) {
	if err := ms.db.open(); err != nil {
		return Stats{}, err
	}
	st, err := ms.db.stats(ctx)
	if err != nil {
		return Stats{}, ms.db.fail("ledger stats", err)
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
		// Retired before the row is in: see retireReplaced.
		if err := rl.db.retireReplaced(ctx, tx, ExitReplayed, r.By, at, []movedFile{{name: r.File, ino: r.Ino}}, 0); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, rl.db.q.insertReplay,
			clean(r.File), clean(r.NewName), nullIno(r.Ino), clean(r.By), nullString(clean(r.Note)),
			formatTime(at))
		return err
	})
	if err != nil {
		return rl.db.fail("record replay of "+clean(r.File), err)
	}
	return nil
}

// Processed returns the processed row of msgID, and false when there is none.
func (ms Messages) Processed(ctx context.Context, msgID string) (Row, bool, error) {
	if err := ms.db.open(); err != nil {
		return Row{}, false, err
	}
	var (
		r               Row
		orderNo, amount sql.NullString
		seq             sql.NullInt64
		processedAt     string
	)
	err := ms.db.sql.QueryRowContext(ctx, ms.db.q.processed, msgID).Scan(
		&r.MsgID, &orderNo, &seq, &amount, &processedAt, &r.File, &r.ContentHash, &r.Payload, &r.Claim,
		&r.Headers.Version, &r.Headers.Trace, &r.Headers.Tenant)
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, false, nil
	}
	if err != nil {
		return Row{}, false, ms.db.fail("processed row "+msgID, err)
	}
	r.OrderNo, r.Seq, r.Amount = orderNo.String, seq.Int64, spool.Amount(amount.String)
	if r.ProcessedAt, err = parseTime("processed.processed_at", processedAt); err != nil {
		return Row{}, false, fmt.Errorf("processed row %s: %w", msgID, err)
	}
	return r, true, nil
}
