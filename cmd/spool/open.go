package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"

	"github.com/spoolq/spool/ledger"
	// The backends --db can name, registered with ledger.Open by scheme.
	_ "github.com/spoolq/spool/ledger/mysql"
	_ "github.com/spoolq/spool/ledger/postgres"
	_ "github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
)

// openQueue opens the queue at dir (queueopen.OpenDir).
func openQueue(dir string) (*queue.Dir, error) { return queueopen.OpenDir(dir) }

// addDBFlag registers --db on fs.
func addDBFlag(fs *flag.FlagSet) *string {
	db := new(string)
	fs.Var(dbValue{db}, "db", "ledger: an SQLite file `PATH` or sqlite:PATH (default DIR/"+queueopen.DefaultLedger+"), or a postgres:// or mysql:// (MariaDB) URL for consumers on many hosts")
	return db
}

// closeLedger closes l, keeping the first error.
func closeLedger(l *ledger.DB, err *error) {
	if cerr := l.Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("close ledger: %w", cerr)
	}
}

// addOutputFlag registers -o on fs.
func addOutputFlag(fs *flag.FlagSet) *string {
	return fs.String("o", "", "write the output to `FILE` atomically instead of stdout")
}

// output writes what fill produces to stdout, or, when path is set, to
// the file at path atomically and durably (queue.ReplaceFile), so a reader
// of path sees the old content or the new, never a part.
func output(e *env, path string, fill func(io.Writer) error) error {
	if path == "" {
		bw := bufio.NewWriter(e.Stdout)
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

// durability parses a --durability value: whether it is relaxed.
func durability(e *env, value string) (bool, error) {
	switch value {
	case "full", "":
		return false, nil
	case "relaxed":
		return true, nil
	}
	return false, e.Usage("--durability %q: want full or relaxed", value)
}
