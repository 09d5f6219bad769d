package queueopen_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queueopen"
)

// TestFsck: a queue without its SQLite ledger is a report, not an error;
// a database that holds no ledger is refused naming it; a repair of a sound
// queue is audited with its counts.
func TestFsck(t *testing.T) {
	ctx := context.Background()
	dir := newQueue(t)
	r, err := queueopen.Fsck(ctx, dir, queueopen.Options{}, queueopen.FsckOptions{})
	if err != nil || r == nil || r.Problems() == 0 {
		t.Fatalf("no ledger: %+v, %v; want a report of the missing ledger", r, err)
	}
	other := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE customers (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = queueopen.Fsck(ctx, dir, queueopen.Options{DB: other}, queueopen.FsckOptions{})
	var re *queueopen.RefusalError
	if !errors.As(err, &re) || !errors.Is(err, ledger.ErrNoLedger) || !strings.Contains(err.Error(), "holds no spool ledger (is --db right?)") {
		t.Errorf("a database without a ledger: %v, want a *RefusalError wrapping ledger.ErrNoLedger", err)
	}
	if _, err := queueopen.Init(ctx, dir, queueopen.Options{Use: queueopen.Write}); err != nil {
		t.Fatal(err)
	}
	a := queueopen.Audited{Who: ledger.AuditEntry{Actor: "os:ann", Via: ledger.AuditCLI}, By: "test"}
	if r, err = queueopen.Fsck(ctx, dir, queueopen.Options{}, queueopen.FsckOptions{Repair: true, Audited: a}); err != nil || r.Problems() != 0 {
		t.Fatalf("repair of a sound queue: %+v, %v", r, err)
	}
	l, err := queueopen.OpenLedger(ctx, dir, queueopen.Options{Use: queueopen.Read})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rows, err := l.Audit().List(ctx, ledger.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var repairs []ledger.AuditRow
	for _, row := range rows {
		if row.Action == queueopen.AuditRepair {
			repairs = append(repairs, row)
		}
	}
	if len(repairs) != 1 {
		t.Fatalf("%d repair rows, want 1", len(repairs))
	}
	for _, row := range repairs {
		if row.Outcome != ledger.AuditOK || row.Actor != "os:ann" || row.Selection != "{}" {
			t.Errorf("repair row %+v: want ok by os:ann, no selection", row)
		}
		if _, ok := row.Counts["repairs"]; !ok {
			t.Errorf("repair row counts %v: want repairs", row.Counts)
		}
	}
}
