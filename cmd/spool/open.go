package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/postgres"
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
	return fs.String("db", "", "ledger: an SQLite file `PATH` (default DIR/"+ledgerName+"), or a postgres:// URL for consumers on many hosts")
}

// ledgerPath is --db, or the queue's own ledger file.
func ledgerPath(dir, db string) string {
	if db != "" {
		return db
	}
	return filepath.Join(dir, ledgerName)
}

// openLedger opens the ledger with full durability.
func openLedger(ctx context.Context, dir, db string) (*ledger.DB, error) {
	return openLedgerWith(ctx, dir, db, false)
}

// openLedgerWith opens the ledger --db names: a PostgreSQL database for a
// postgres:// or postgresql:// URL, else the SQLite file (created if
// needed). relaxed applies to SQLite only; a PostgreSQL server decides its
// own durability, and the backend refuses one that is not durable.
func openLedgerWith(ctx context.Context, dir, db string, relaxed bool) (*ledger.DB, error) {
	if isPostgres(db) {
		return postgres.Open(ctx, db)
	}
	if isKeywordDSN(db) {
		// Taken as a file name, it would quietly give this host a ledger of
		// its own, and consumers meant to share one would not.
		return nil, &usageError{msg: fmt.Sprintf("--db %q looks like a PostgreSQL keyword/value connection string; give a postgres:// URL", db)}
	}
	l, err := sqlite.OpenWith(ctx, ledgerPath(dir, db), sqlite.Options{Relaxed: relaxed})
	return l, nameDBFlag(db, err)
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

func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
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
// the file at path atomically: a temp file in the same directory, synced,
// renamed over path, and the directory synced, so a reader of path sees
// the old content or the new, never a part.
func (e *env) output(path string, fill func(io.Writer) error) error {
	if path == "" {
		bw := bufio.NewWriter(e.stdout)
		if err := fill(bw); err != nil {
			return err
		}
		return bw.Flush()
	}
	if err := writeAtomic(path, fill); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func writeAtomic(path string, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriter(f)
	if err := fill(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	// CreateTemp makes the file 0600; an output file is for everyone who
	// may read the directory, like one made by the shell's redirection.
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
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

// openQueueAndLedger opens the queue at dir, then its ledger, for the
// commands that read both; done closes them, keeping the first error in
// *err.
func openQueueAndLedger(ctx context.Context, dir, db string) (d *queue.Dir, l *ledger.DB, done func(err *error), err error) {
	if d, err = openQueue(dir); err != nil {
		return nil, nil, nil, err
	}
	if l, err = openLedger(ctx, dir, db); err != nil {
		_ = d.Close() // the error that matters is the ledger's
		return nil, nil, nil, err
	}
	return d, l, func(err *error) {
		closeLedger(l, err)
		closeQueue(d, err)
	}, nil
}
