package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// This file holds what spool backup asks of a ledger: a consistent copy
// into a file, and the checks of that copy.

// Backup is what spool backup asks of a ledger: a consistent copy of the
// whole ledger into a file, taken while consumers write, and the checks of
// such a copy (the engine's integrity check, the rows it holds). It never
// writes to the ledger it copies. Reached by DB.Backup.
type Backup struct{ db *DB }

// Backup returns the ledger's copy and checks.
func (db *DB) Backup() Backup { return Backup{db} }

// NoSnapshotError is returned by Backup.SnapshotInto for an engine that cannot
// copy a ledger into a file (its Dialect's Snapshot has no Into): the
// engine's own tool backs it up.
type NoSnapshotError struct {
	// Engine is the Dialect's Name; Tool its Snapshot's Tool.
	Engine, Tool string
}

func (e *NoSnapshotError) Error() string {
	if e.Tool == "" {
		return fmt.Sprintf("a %s ledger cannot be copied into a file by spool", e.Engine)
	}
	return fmt.Sprintf("a %s ledger is backed up with %s, not copied into a file by spool", e.Engine, e.Tool)
}

// CanSnapshot returns nil when the ledger's engine can copy it into a file
// (Backup.SnapshotInto), and a *NoSnapshotError otherwise.
func (bk Backup) CanSnapshot() error {
	s := bk.db.dialect.Snapshot()
	if s.Into == "" {
		return &NoSnapshotError{Engine: bk.db.dialect.Name(), Tool: s.Tool}
	}
	return nil
}

// SnapshotInto writes a consistent copy of the whole ledger, as one read
// snapshot of it, into the file at path, which must be empty or absent:
// writers (consumers) go on meanwhile. It does not sync the file; the
// caller does, before it trusts the copy. An engine that cannot
// (Backup.CanSnapshot) returns a *NoSnapshotError and writes nothing.
func (bk Backup) SnapshotInto(ctx context.Context, path string) error {
	if err := bk.db.open(); err != nil {
		return err
	}
	if err := bk.CanSnapshot(); err != nil {
		return err
	}
	if _, err := bk.db.sql.ExecContext(ctx, bk.db.dialect.Rebind(bk.db.dialect.Snapshot().Into), path); err != nil {
		return bk.db.fail("copy ledger into "+path, err)
	}
	return nil
}

// ErrDamaged is wrapped by Backup.CheckIntegrity for a database whose engine
// finds it damaged.
var ErrDamaged = errors.New("the database is damaged")

// CheckIntegrity runs the engine's integrity check (Dialect's
// Snapshot.Check) and returns nil when it finds the database sound, an
// error wrapping ErrDamaged with what it found otherwise. An engine with
// no such check returns a *NoSnapshotError.
func (bk Backup) CheckIntegrity(ctx context.Context) error {
	if err := bk.db.open(); err != nil {
		return err
	}
	q := bk.db.dialect.Snapshot().Check
	if q == "" {
		return &NoSnapshotError{Engine: bk.db.dialect.Name(), Tool: bk.db.dialect.Snapshot().Tool}
	}
	rows, err := bk.db.sql.QueryContext(ctx, q)
	if err != nil {
		return bk.db.fail("check integrity", err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return bk.db.fail("check integrity", err)
		}
		found = append(found, s)
	}
	if err := rows.Err(); err != nil {
		return bk.db.fail("check integrity", err)
	}
	if len(found) == 1 && found[0] == "ok" {
		return nil
	}
	if len(found) > 5 {
		found = append(found[:5], fmt.Sprintf("and %d more", len(found)-5))
	}
	return fmt.Errorf("check integrity: %w: %s", ErrDamaged, strings.Join(found, "; "))
}

// Rows counts the rows of a ledger's history, as spool backup reports
// what it copied.
type Rows struct {
	// Processed counts the processed rows, Deliveries the deliveries
	// (duplicates, dead letters, conflicts), Replays the replay records.
	Processed, Deliveries, Replays int64
}

// Total is the sum of the counts.
func (r Rows) Total() int64 { return r.Processed + r.Deliveries + r.Replays }

// CountRows counts the history's rows in one read snapshot.
func (bk Backup) CountRows(ctx context.Context) (Rows, error) {
	if err := bk.db.open(); err != nil {
		return Rows{}, err
	}
	var r Rows
	err := bk.db.sql.QueryRowContext(ctx, `SELECT
    (SELECT COUNT(*) FROM processed), (SELECT COUNT(*) FROM deliveries), (SELECT COUNT(*) FROM replays)`).
		Scan(&r.Processed, &r.Deliveries, &r.Replays)
	if err != nil {
		return Rows{}, bk.db.fail("count rows", err)
	}
	return r, nil
}
