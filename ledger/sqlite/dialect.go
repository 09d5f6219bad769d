package sqlite

import (
	"embed"
	"errors"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/ledger"
)

//go:embed migrations/*.up.sql
var migrations embed.FS

// Dialect returns the ledger.Dialect of SQLite 3.25 or later: ? placeholders,
// one writer at a time, and write transactions that the backend begins with
// BEGIN IMMEDIATE. Its conflicts are SQLITE_BUSY and SQLITE_LOCKED, from any
// driver whose errors have a Code() int method giving SQLite's (extended)
// result code, as modernc.org/sqlite's do.
func Dialect() ledger.Dialect { return dialect{} }

type dialect struct{}

func (dialect) Name() string               { return Scheme }
func (dialect) Rebind(query string) string { return query }
func (dialect) MigrationLock() string      { return "" }
func (dialect) Placeholder(n int) string   { return "?" + strconv.Itoa(n) }

// SingleWriter: SQLite admits one write transaction per database file.
func (dialect) SingleWriter() bool { return true }

// PadRows: a statement is a function call, not a round trip.
func (dialect) PadRows() bool { return false }

// MaxKey: SQLite's TEXT keys have no length of their own.
func (dialect) MaxKey() int { return 0 }

// Retry: a busy database is waited for in the busy handler, for the busy
// timeout, before it is an error; running the transaction again would
// only wait as long once more.
func (dialect) Retry(error) bool { return false }

func (dialect) Migrations() fs.FS {
	f, err := fs.Sub(migrations, "migrations")
	if err != nil {
		// fs.Sub fails only for an invalid path, and this is a constant.
		panic(err)
	}
	return f
}

func (dialect) InsertNew(insert, key, returning string) string {
	s := insert + "\nON CONFLICT (" + key + ") DO NOTHING"
	if returning != "" {
		s += "\nRETURNING " + returning
	}
	return s
}

func (dialect) InsertOrUpdate(insert, key string, update []string) string {
	return insert + "\nON CONFLICT (" + key + ") DO UPDATE SET " + setExcluded(update)
}

// setExcluded is "a = excluded.a, b = excluded.b".
func setExcluded(cols []string) string {
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = c + " = excluded." + c
	}
	return strings.Join(set, ", ")
}

// errNoTimeout says why SQLite refuses a statement timeout.
var errNoTimeout = errors.New("SQLite cannot stop one statement without rolling back the batch's whole transaction (its waits for locks are bounded by the busy timeout)")

// StatementTimeout is refused: the only way to stop a statement,
// sqlite3_interrupt, rolls back a write's whole transaction, the batch's
// with it.
func (dialect) StatementTimeout(time.Duration) (string, string, error) {
	return "", "", errNoTimeout
}

// IsMissingTable: SQLite's "no such table", a plain SQLITE_ERROR (1)
// that only its text tells from the others.
func (dialect) IsMissingTable(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == 1 && strings.Contains(err.Error(), "no such table")
}

func (dialect) IsConflict(err error) bool {
	var coded interface{ Code() int }
	if !errors.As(err, &coded) {
		return false
	}
	// The primary result code is the low byte of the extended one.
	const sqliteBusy, sqliteLocked = 5, 6
	switch coded.Code() & 0xff {
	case sqliteBusy, sqliteLocked:
		return true
	}
	return false
}

// Leases: none. An SQLite ledger is one host's, and its sessions' flocks
// say at once which are alive.
func (dialect) Leases() (ledger.LeaseSQL, bool) { return ledger.LeaseSQL{}, false }

// Snapshot: VACUUM INTO copies the database in one read transaction,
// which in WAL mode does not hold the consumers' writes back.
func (dialect) Snapshot() ledger.Snapshot {
	return ledger.Snapshot{Into: "VACUUM INTO ?", Check: "PRAGMA integrity_check"}
}
