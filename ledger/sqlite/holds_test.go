package sqlite_test

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/spoolq/spool/ledger/sqlite"
)

// TestHoldsLedger: a ledger is recognised; an application's database in
// rollback-journal mode is not, and is left byte for byte as it was.
func TestHoldsLedger(t *testing.T) {
	dir := t.TempDir()
	ledgerPath := filepath.Join(dir, "ledger.db")
	l, err := sqlite.Open(t.Context(), ledgerPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, err := sqlite.HoldsLedger(t.Context(), ledgerPath); err != nil || !ok {
		t.Errorf("HoldsLedger(a ledger) = %v, %v; want true", ok, err)
	}

	appPath := filepath.Join(dir, "app.db")
	db, err := sql.Open("sqlite", "file:"+appPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(appPath)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := sqlite.HoldsLedger(t.Context(), appPath); err != nil || ok {
		t.Errorf("HoldsLedger(an application's database) = %v, %v; want false", ok, err)
	}
	after, err := os.ReadFile(appPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("HoldsLedger changed the application's database")
	}
	if _, err := os.Stat(appPath + "-wal"); err == nil {
		t.Error("HoldsLedger left a -wal file beside the application's database")
	}
}
