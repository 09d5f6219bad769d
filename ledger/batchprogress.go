package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool"
)

// RecordBatch is RecordWork with a batch file's progress written in the
// same transaction (spool_batch_progress, migration 045): the records
// committed and the position after them are one, so that a consumer
// killed anywhere resumes after the last record committed, never before
// nor after it. See spool.BatchLedger.
func (db *DB) RecordBatch(ctx context.Context, batch []*spool.Delivery, w spool.Work, p spool.BatchProgress) ([]spool.Result, error) {
	if err := db.open(); err != nil {
		return nil, err
	}
	if p.File == "" || p.Batch == "" {
		return nil, errors.New("record batch file: progress without a file or batch identity")
	}
	if w.Handler != nil && w.Decide == nil {
		return nil, errors.New("record batch file: work has a handler but no Decide")
	}
	for i, d := range batch {
		if err := db.checkDelivery(d); err != nil {
			return nil, fmt.Errorf("record batch file %s: delivery %d: %w", p.File, i, err)
		}
	}
	if w.Handler != nil {
		ctx = spool.WithEmitter(ctx, db.emit)
	}
	now := formatTime(time.Now())
	progress := func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, db.dialect.Rebind(`UPDATE spool_batch_progress SET position = ?, at = ? WHERE file = ?`), p.Position, now, p.File)
		if err != nil {
			return fmt.Errorf("progress of %s: %w", p.File, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("progress of %s: %w", p.File, err)
		} else if n > 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, db.dialect.Rebind(`INSERT INTO spool_batch_progress (file, batch, position, at) VALUES (?, ?, ?, ?)`), p.File, p.Batch, p.Position, now)
		if err != nil {
			return fmt.Errorf("progress of %s: %w", p.File, err)
		}
		return nil
	}
	if len(batch) == 0 {
		if err := db.writeTx(ctx, progress); err != nil {
			return nil, db.fail("record batch file", err)
		}
		return nil, nil
	}
	res, err := db.recordWith(ctx, db.screenKeys(batch), w, progress)
	if err != nil {
		return nil, db.fail("record batch file", err)
	}
	out := make([]spool.Result, len(batch))
	for i, d := range batch {
		out[i] = res[i].public(d)
	}
	return out, nil
}

// BatchProgress returns the progress kept for the batch file identity
// file; see spool.BatchLedger.
func (db *DB) BatchProgress(ctx context.Context, file string) (spool.BatchProgress, bool, error) {
	if err := db.open(); err != nil {
		return spool.BatchProgress{}, false, err
	}
	p := spool.BatchProgress{File: file}
	err := db.sql.QueryRowContext(ctx, db.dialect.Rebind(`SELECT batch, position FROM spool_batch_progress WHERE file = ?`), file).Scan(&p.Batch, &p.Position)
	if errors.Is(err, sql.ErrNoRows) {
		return spool.BatchProgress{}, false, nil
	}
	if err != nil {
		return spool.BatchProgress{}, false, db.fail("batch progress "+file, err)
	}
	return p, true, nil
}

// DeadLetterIno reports whether a dead letter is recorded with inode ino;
// see spool.BatchLedger.
func (db *DB) DeadLetterIno(ctx context.Context, ino uint64) (bool, error) {
	if err := db.open(); err != nil {
		return false, err
	}
	var n int
	err := db.sql.QueryRowContext(ctx, db.dialect.Rebind(`SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter' AND ino = ?`), nullIno(ino)).Scan(&n)
	if err != nil {
		return false, db.fail("dead letter by inode", err)
	}
	return n > 0, nil
}
