package ledger

import (
	"context"
	"errors"
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
		`SELECT file, processed, duplicates, dead_letters, at FROM spool_batch_progress ORDER BY at DESC, file DESC LIMIT ?`), n)
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

// BatchFileStory is a batch file as spool show tells it: what became of
// its records, and the names its records' dead letters were given.
type BatchFileStory struct {
	BatchFile
	// DeadLetterFiles are the names of its records' dead letters
	// (NAME~L17.csv), in the order they were recorded, at most the limit
	// asked for; DeadLetters counts them all.
	DeadLetterFiles []string
}

// BatchFilesNamed returns the batch files the ledger knows by name, as
// they were named in inbox/ when claimed: one for each file of that name
// (a file sent again is another), the latest first, each with at most
// limit of its dead letters' names. None for a name that was never a
// batch file.
func (ms Messages) BatchFilesNamed(ctx context.Context, name string, limit int) ([]BatchFileStory, error) {
	db := ms.db
	if err := db.open(); err != nil {
		return nil, err
	}
	what := "batch files named " + clean(name)
	// The identity is the name, then ":ino:size:mtime"; LIKE may match
	// more (SQLite's ignores ASCII case), BatchFileName decides.
	prefix := likeLiteral(clean(name)) + ":%"
	rows, err := db.sql.QueryContext(ctx, db.dialect.Rebind(
		`SELECT file, batch, processed, duplicates, dead_letters, at FROM spool_batch_progress WHERE file LIKE ? ESCAPE '!' ORDER BY at DESC`), prefix)
	if err != nil {
		return nil, db.fail(what, err)
	}
	var out []BatchFileStory
	var batches []string
	for rows.Next() {
		var f BatchFileStory
		var file, batch, at string
		if err := rows.Scan(&file, &batch, &f.Processed, &f.Duplicates, &f.DeadLetters, &at); err != nil {
			rows.Close()
			return nil, db.fail(what, err)
		}
		if f.Name = spool.BatchFileName(file); f.Name != clean(name) {
			continue
		}
		if f.At, err = parseTime("spool_batch_progress.at", at); err != nil {
			rows.Close()
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, f)
		batches = append(batches, batch)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, db.fail(what, err)
	}
	for i, batch := range batches {
		if out[i].DeadLetters == 0 || limit <= 0 {
			continue
		}
		// A record's delivery claim is the batch's, '#' and its index.
		claims := likeLiteral(batch) + "#%"
		if out[i].DeadLetterFiles, err = ms.deadLetterFiles(ctx, claims, limit); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	return out, nil
}

// deadLetterFiles returns the files of the first limit dead letters whose
// claim matches the LIKE pattern claims.
func (ms Messages) deadLetterFiles(ctx context.Context, claims string, limit int) ([]string, error) {
	db := ms.db
	rows, err := db.sql.QueryContext(ctx, db.dialect.Rebind(
		`SELECT file FROM deliveries WHERE outcome = 'dead-letter' AND claim LIKE ? ESCAPE '!' ORDER BY id LIMIT ?`), claims, limit)
	if err != nil {
		return nil, db.fail("dead letters of a batch file", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var f string
		if err := rows.Scan(&f); err != nil {
			return nil, db.fail("dead letters of a batch file", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, db.fail("dead letters of a batch file", err)
	}
	return out, nil
}
