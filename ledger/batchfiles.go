package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool"
)

// BatchFile is what became of a batch file's records so far: those before
// its progress (spool_batch_progress, migrations 045 and 046), counted in
// the transactions that moved the progress past them, so that a record is
// counted once however often its consumer was killed.
type BatchFile struct {
	// Name is the file's name in inbox/ when it was claimed.
	Name string
	// Processed, Duplicates and DeadLetters count its records by outcome.
	Processed, Duplicates, DeadLetters int64
	// At is when its progress last moved: its last commit.
	At time.Time
}

// Records is how many of the file's records are behind its progress.
func (f BatchFile) Records() int64 { return f.Processed + f.Duplicates + f.DeadLetters }

// RecentBatchFiles returns the n batch files whose progress moved last,
// the latest first: the files being consumed and the ones just finished.
// A ledger that never consumed a batch file has none.
func (ms Messages) RecentBatchFiles(ctx context.Context, n int) ([]BatchFile, error) {
	db := ms.db
	if err := db.open(); err != nil {
		return nil, err
	}
	rows, err := db.sql.QueryContext(ctx, db.dialect.Rebind(
		`SELECT file, processed, duplicates, dead_letters, at FROM spool_batch_progress ORDER BY at DESC, file LIMIT ?`), n)
	if err != nil {
		return nil, db.fail("recent batch files", err)
	}
	defer rows.Close()
	var out []BatchFile
	for rows.Next() {
		var f BatchFile
		var file, at string
		if err := rows.Scan(&file, &f.Processed, &f.Duplicates, &f.DeadLetters, &at); err != nil {
			return nil, db.fail("recent batch files", err)
		}
		f.Name = spool.BatchFileName(file)
		if f.At, err = parseTime("spool_batch_progress.at", at); err != nil {
			return nil, fmt.Errorf("recent batch files: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, db.fail("recent batch files", err)
	}
	return out, nil
}
