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

// RecordBatch is Record with a batch file's progress written in the
// same transaction (spool_batch_progress, migration 045): the records
// committed and the position after them are one, so that a consumer
// killed anywhere resumes after the last record committed, never before
// nor after it. See spool.Ledger.
func (l Consumer) RecordBatch(ctx context.Context, batch []*spool.Delivery, w spool.Work, p spool.BatchProgress) ([]spool.Result, error) {
	if err := l.db.open(); err != nil {
		return nil, err
	}
	if p.File == "" || p.Batch == "" {
		return nil, errors.New("record batch file: progress without a file or batch identity")
	}
	if w.Handler != nil && w.Decide == nil {
		return nil, errors.New("record batch file: work has a handler but no Decide")
	}
	for i, d := range batch {
		if err := l.db.checkDelivery(d); err != nil {
			return nil, fmt.Errorf("record batch file %s: delivery %d: %w", p.File, i, err)
		}
	}
	now := formatTime(time.Now())
	// The identity holds the file's name, stored as every name is (clean):
	// a name that is not UTF-8 is no error on any engine.
	file := clean(p.File)
	// The file's counts grow by the records the progress passes now: the
	// batch's own, decided in this transaction, and p.Passed, recorded
	// before it (migration 046).
	progress := func(tx *sql.Tx, res []result) error {
		n := p.Passed
		for _, r := range res {
			switch r.outcome {
			case spool.OutcomeProcessed:
				n.Processed++
			case spool.OutcomeDuplicate:
				n.Duplicates++
			case spool.OutcomeDeadLetter:
				n.DeadLetters++
			}
		}
		upd, err := tx.ExecContext(ctx, l.db.dialect.Rebind(`UPDATE spool_batch_progress SET position = ?, at = ?,
			processed = processed + ?, duplicates = duplicates + ?, dead_letters = dead_letters + ? WHERE file = ?`),
			p.Position, now, n.Processed, n.Duplicates, n.DeadLetters, file)
		if err != nil {
			return fmt.Errorf("progress of %s: %w", p.File, err)
		}
		if rows, err := upd.RowsAffected(); err != nil {
			return fmt.Errorf("progress of %s: %w", p.File, err)
		} else if rows > 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, l.db.dialect.Rebind(`INSERT INTO spool_batch_progress (file, batch, position, at, processed, duplicates, dead_letters)
			VALUES (?, ?, ?, ?, ?, ?, ?)`), file, p.Batch, p.Position, now, n.Processed, n.Duplicates, n.DeadLetters)
		if err != nil {
			return fmt.Errorf("progress of %s: %w", p.File, err)
		}
		return nil
	}
	if len(batch) == 0 {
		if err := l.db.writeTx(ctx, func(tx *sql.Tx) error { return progress(tx, nil) }); err != nil {
			return nil, l.db.fail("record batch file", err)
		}
		return nil, nil
	}
	res, err := l.db.recordWith(ctx, l.db.screenKeys(batch), w, progress)
	if err != nil {
		return nil, l.db.fail("record batch file", err)
	}
	out := make([]spool.Result, len(batch))
	for i, d := range batch {
		out[i] = res[i].public(d)
	}
	return out, nil
}

// BatchProgress returns the progress kept for the batch file identity
// file; see spool.Ledger.
func (l Consumer) BatchProgress(ctx context.Context, file string) (spool.BatchProgress, bool, error) {
	if err := l.db.open(); err != nil {
		return spool.BatchProgress{}, false, err
	}
	p := spool.BatchProgress{File: file}
	// Stored as RecordBatch stores it.
	err := l.db.sql.QueryRowContext(ctx, l.db.dialect.Rebind(`SELECT batch, position FROM spool_batch_progress WHERE file = ?`), clean(file)).Scan(&p.Batch, &p.Position)
	if errors.Is(err, sql.ErrNoRows) {
		return spool.BatchProgress{}, false, nil
	}
	if err != nil {
		return spool.BatchProgress{}, false, l.db.fail("batch progress "+file, err)
	}
	return p, true, nil
}

// DeadLetterIno reports whether a dead letter is recorded with inode ino;
// see spool.Ledger.
func (l Consumer) DeadLetterIno(ctx context.Context, ino uint64) (bool, error) {
	if err := l.db.open(); err != nil {
		return false, err
	}
	var n int
	err := l.db.sql.QueryRowContext(ctx, l.db.dialect.Rebind(`SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter' AND ino = ?`), nullIno(ino)).Scan(&n)
	if err != nil {
		return false, l.db.fail("dead letter by inode", err)
	}
	return n > 0, nil
}

// SetDeadLetterFile names the file that stands for the dead letter of
// claim in error/, and its inode: a batch file's record its handler
// dead-lettered, whose one-record file is written after the commit that
// decided it. See spool.Ledger.
func (l Consumer) SetDeadLetterFile(ctx context.Context, claim, file string, ino uint64) error {
	if err := l.db.open(); err != nil {
		return err
	}
	err := l.db.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, l.db.dialect.Rebind(`UPDATE deliveries SET file = ?, ino = ? WHERE claim = ? AND outcome = 'dead-letter'`), clean(file), nullIno(ino), claim)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return fmt.Errorf("no dead letter of claim %s", claim)
		}
		return nil
	})
	if err != nil {
		return l.db.fail("set dead letter file", err)
	}
	return nil
}

// UnwrittenDeadLetters returns the claims of the dead letters of batch (a
// BatchProgress.Batch) still recorded under their record's origin, a file
// name starting with origin (the batch file's name and "#"): those whose
// one-record file was not written when their consumer died. See
// spool.Ledger.
func (l Consumer) UnwrittenDeadLetters(ctx context.Context, batch, origin string) ([]string, error) {
	if err := l.db.open(); err != nil {
		return nil, err
	}
	rows, err := l.db.sql.QueryContext(ctx, l.db.dialect.Rebind(`SELECT claim, file FROM deliveries WHERE outcome = 'dead-letter' AND claim LIKE ?`), likePrefix(batch+"#"))
	if err != nil {
		return nil, l.db.fail("unwritten dead letters", err)
	}
	defer rows.Close()
	// The file column holds names as clean stores them.
	origin = clean(origin)
	var out []string
	for rows.Next() {
		var claim, file string
		if err := rows.Scan(&claim, &file); err != nil {
			return nil, l.db.fail("unwritten dead letters", err)
		}
		// LIKE's wildcards in the prefix match more: keep the exact ones.
		if strings.HasPrefix(claim, batch+"#") && strings.HasPrefix(file, origin) {
			out = append(out, claim)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, l.db.fail("unwritten dead letters", err)
	}
	return out, nil
}

// likePrefix is a LIKE pattern of the strings starting with p: p's own
// wildcards match any character, a superset the caller filters.
func likePrefix(p string) string { return p + "%" }
