package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDBFlagErrors: a --db that cannot be a ledger says why, in the flag's
// words, with exit 2, and creates nothing: before, each of these was
// SQLite's "unable to open database file (14)" or "file is not a
// database (26)", exit 3.
func TestDBFlagErrors(t *testing.T) {
	q := newQueue(t)
	write(t, filepath.Join(q, "inbox", "a.json"), msg("1", "A", 1, "1"))
	base := t.TempDir()
	notDB := filepath.Join(base, "notes.txt")
	write(t, notDB, "shopping list\n")
	missing := filepath.Join(base, "nope")
	all := []string{"consume", "dups", "errors"}
	for _, tt := range []struct {
		name, db, want string
		cmds           []string
	}{
		{"a directory", base, "--db " + base + " is a directory", all},
		// Only for a command that would create the ledger: to a report, a
		// ledger that does not exist is missing, wherever it would be.
		{"a missing directory", filepath.Join(missing, "x.db"), "--db " + filepath.Join(missing, "x.db") + ": directory " + missing + " does not exist", []string{"consume"}},
		{"not a database", notDB, "--db " + notDB + " is not an SQLite database (file is not a database (26))", all},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before, beforeBase := listing(t, q), listing(t, base)
			for _, cmd := range tt.cmds {
				cli(t, cmd, q, "--db", tt.db).wantFail(t, 2, cmd, tt.want)
			}
			if listing(t, q) != before || listing(t, base) != beforeBase {
				t.Errorf("a refused --db changed files")
			}
			if _, err := os.Stat(filepath.Join(q, "ledger.db")); err != nil {
				t.Errorf("the queue's own ledger: %v", err)
			}
		})
	}
}

// TestDBFlagKeywordDSN: a --db in PostgreSQL's keyword/value form is
// named as such, also on a queue with history, where it would otherwise
// be taken for a missing SQLite file.
func TestDBFlagKeywordDSN(t *testing.T) {
	q := newQueue(t)
	write(t, filepath.Join(q, "done", "old.json"), msg("0", "A", 0, "1"))
	before := listing(t, q)
	for _, cmd := range []string{"consume", "dups", "errors"} {
		cli(t, cmd, q, "--db", "host=db dbname=queue").wantFail(t, 2, cmd, `--db "host=db dbname=queue" looks like a PostgreSQL keyword/value connection string`)
	}
	if listing(t, q) != before {
		t.Errorf("a refused --db changed files")
	}
}

// TestLedgerFileErrors: the queue's own ledger.db is named as "ledger
// PATH" when it cannot be one.
func TestLedgerFileErrors(t *testing.T) {
	q := newQueue(t)
	path := filepath.Join(q, "ledger.db")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	cli(t, "consume", q).wantFail(t, 2, "consume", "ledger "+path+" is a directory")
}
