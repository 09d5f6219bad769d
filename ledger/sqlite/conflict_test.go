package sqlite

import (
	"database/sql"
	"path/filepath"
	"testing"

	sqlite3 "modernc.org/sqlite"
)

// The dialect finds SQLite's result code through this method; a driver
// upgrade that dropped it would make every busy database look permanent.
var _ interface{ Code() int } = (*sqlite3.Error)(nil)

// TestIsConflict: the dialect's classification on the driver's real
// errors. A write lock held elsewhere is a conflict; a bad statement is not.
func TestIsConflict(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "busy.db")
	open := func() *sql.DB {
		// No busy timeout, so the second writer fails at once.
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)&_txlock=immediate")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	a, b := open(), open()
	txA, err := a.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = txA.Rollback() }()
	d := Dialect()
	txB, err := b.BeginTx(ctx, nil)
	if err == nil {
		_ = txB.Rollback()
		t.Fatal("a second BEGIN IMMEDIATE succeeded while the first held the write lock")
	}
	if !d.IsConflict(err) {
		t.Errorf("IsConflict(%v) = false, want true", err)
	}
	_, err = a.ExecContext(ctx, "SELEKT 1")
	if err == nil {
		t.Fatal("a syntax error succeeded")
	}
	if d.IsConflict(err) {
		t.Errorf("IsConflict(%v) = true, want false", err)
	}
}
