package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/spoolq/spool/ledger"
	// The backends --db can name, registered with ledger.Open by scheme.
	_ "github.com/spoolq/spool/ledger/postgres"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
)

// ledgerName is the default ledger file inside the queue directory.
const ledgerName = "ledger.db"

// openQueue opens the queue at dir. A directory that does not exist is
// not a queue: a configuration error, like one that lacks a stage.
func openQueue(dir string) (*queue.Dir, error) {
	d, err := queue.Open(dir)
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, queue.ErrNotQueue) {
		return nil, fmt.Errorf("open queue %s: %w: no such directory (create one with spool init)", dir, queue.ErrNotQueue)
	}
	return d, err
}

// addDBFlag registers --db on fs.
func addDBFlag(fs *flag.FlagSet) *string {
	db := new(string)
	fs.Var(dbValue{db}, "db", "ledger: an SQLite file `PATH` or sqlite:PATH (default DIR/"+ledgerName+"), or a postgres:// URL for consumers on many hosts")
	return db
}

// sqliteFile returns the SQLite file --db names (a path, or sqlite:PATH),
// or false when --db names a database of another backend.
func sqliteFile(dir, db string) (string, bool) {
	if path, ok := strings.CutPrefix(db, sqlite.Scheme+":"); ok {
		return path, true
	}
	if ledger.HasScheme(db) {
		return "", false
	}
	return ledgerPath(dir, db), true
}

// ledgerPath is --db, or the queue's own ledger file.
func ledgerPath(dir, db string) string {
	if db != "" {
		return db
	}
	return filepath.Join(dir, ledgerName)
}

// openLedgerWith opens the ledger --db names, with the backend registered
// for its scheme (ledger.Open): a PostgreSQL database for a postgres:// or
// postgresql:// URL, else the SQLite file of a path or sqlite:PATH.
// o.relaxed applies to SQLite only; a PostgreSQL server decides its own
// durability, and the backend refuses one that is not durable. For
// readLedger nothing is created. Commands call openLedgerFor, which also
// checks the ledger belongs to the queue.
func openLedgerWith(ctx context.Context, dir, db string, o ledgerOpts) (*ledger.DB, error) {
	if err := refuseKeywordDSN(db); err != nil {
		return nil, err
	}
	l, err := ledger.Open(ctx, ledgerPath(dir, db), ledger.OpenOptions{Relaxed: o.relaxed, MustExist: o.use == readLedger})
	return l, nameDBFlag(db, err)
}

// refuseKeywordDSN refuses a --db in libpq's keyword/value form: taken as
// a file name, it would quietly give this host a ledger of its own, and
// consumers meant to share one would not.
func refuseKeywordDSN(db string) error {
	if !ledger.HasScheme(db) && isKeywordDSN(db) {
		return &usageError{msg: fmt.Sprintf("--db %q looks like a PostgreSQL keyword/value connection string; give a postgres:// URL", db)}
	}
	return nil
}

// isKeywordDSN reports whether db reads as libpq's keyword/value form
// ("host=... dbname=..."), which no SQLite path a user means does.
func isKeywordDSN(db string) bool {
	for _, f := range strings.Fields(db) {
		k, _, ok := strings.Cut(f, "=")
		switch k {
		case "host", "hostaddr", "port", "dbname", "user", "sslmode":
			if ok {
				return true
			}
		}
	}
	return false
}

// closeLedger closes l, keeping the first error.
func closeLedger(l *ledger.DB, err *error) {
	if cerr := l.Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("close ledger: %w", cerr)
	}
}

// closeQueue closes d, keeping the first error.
func closeQueue(d *queue.Dir, err *error) {
	if cerr := d.Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("close queue: %w", cerr)
	}
}

// addOutputFlag registers -o on fs.
func addOutputFlag(fs *flag.FlagSet) *string {
	return fs.String("o", "", "write the output to `FILE` atomically instead of stdout")
}

// output writes what fill produces to stdout, or, when path is set, to
// the file at path atomically and durably (queue.ReplaceFile), so a reader
// of path sees the old content or the new, never a part.
func (e *env) output(path string, fill func(io.Writer) error) error {
	if path == "" {
		bw := bufio.NewWriter(e.stdout)
		if err := fill(bw); err != nil {
			return err
		}
		return bw.Flush()
	}
	return queue.ReplaceFile(path, fill)
}

// addDurabilityFlag registers --durability on fs.
func addDurabilityFlag(fs *flag.FlagSet) *string {
	return fs.String("durability", "full", "`full` (every batch fsynced before its files move) or relaxed (a power cut may lose the last batches; a crash loses nothing)")
}

// relaxed parses a --durability value.
func (e *env) relaxed(durability string) (bool, error) {
	switch durability {
	case "full", "":
		return false, nil
	case "relaxed":
		return true, nil
	}
	return false, e.usage("--durability %q: want full or relaxed", durability)
}
