package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queueopen"
)

// TestOpenLedgerBackends: --db picks the backend by scheme; a plain path
// and sqlite:PATH both name an SQLite file, and the default is the queue's.
func TestOpenLedgerBackends(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ db, file string }{
		{"", filepath.Join(dir, queueopen.DefaultLedger)},
		{filepath.Join(dir, "plain.db"), filepath.Join(dir, "plain.db")},
		{"sqlite:" + filepath.Join(dir, "schemed.db"), filepath.Join(dir, "schemed.db")},
	} {
		l, err := queueopen.OpenLedger(t.Context(), dir, ledgerOpts{use: writeLedger}.options(c.db))
		if err != nil {
			t.Fatalf("openLedger(--db %q): %v", c.db, err)
		}
		if got, want := l.Dialect().Name(), sqlite.Dialect().Name(); got != want {
			t.Errorf("--db %q: dialect %s, want %s", c.db, got, want)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(c.file); err != nil {
			t.Errorf("--db %q: no ledger at %s: %v", c.db, c.file, err)
		}
	}
}
