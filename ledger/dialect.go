package ledger

import (
	"embed"
	"errors"
	"io/fs"
	"strconv"
	"strings"
)

// Dialect is the seam between SQL engines. It is deliberately tiny: the
// queries themselves are shared, so only what cannot be written portably
// lives here. Use SQLite or PostgreSQL; the interface exists so that a
// backend package can pass its engine to New, not to invite more engines
// than the migrations directory holds.
type Dialect interface {
	// Name is the engine's name, as used for its migrations directory:
	// "sqlite" or "postgres".
	Name() string
	// Rebind rewrites a shared query's ? placeholders into the engine's
	// style. It must leave ? inside quoted literals alone.
	Rebind(query string) string
	// Placeholder is the engine's numbered placeholder for a query's n-th
	// argument, n from 1 ("?1" on SQLite, "$1" on PostgreSQL), for queries
	// that refer to one argument more than once.
	Placeholder(n int) string
	// IsConflict reports whether err is the engine telling of a conflict
	// with other work, which a later attempt may not meet (a lock held
	// elsewhere, a deadlock, a serialization failure, a timeout waiting for
	// one of them), rather than a fault of the statement or of its data.
	// It is the backend's one classification of such errors: a busy
	// database to retry, a handler's failure to call transient.
	IsConflict(err error) bool
	// Migrations holds the engine's migration files at its root, named
	// NNN_name.up.sql and applied in NNN order.
	Migrations() fs.FS
	// MigrationLock is run first in the migration transaction so that
	// processes migrating at once take turns. Empty when the transaction
	// itself is already exclusive (SQLite begins write transactions with
	// BEGIN IMMEDIATE).
	MigrationLock() string
}

//go:embed migrations
var migrations embed.FS

// SQLite returns the dialect of SQLite 3.25 or later: ? placeholders, and
// write transactions that the backend must begin with BEGIN IMMEDIATE. Its
// conflicts are SQLITE_BUSY and SQLITE_LOCKED, from any driver whose errors
// have a Code() int method giving SQLite's (extended) result code, as
// modernc.org/sqlite's do.
func SQLite() Dialect { return sqliteDialect{} }

// PostgreSQL returns the dialect of PostgreSQL 15 or later: $1, $2, ...
// placeholders, and an advisory lock serialising migrations. Its conflicts
// are the SQLSTATEs serialization_failure, deadlock_detected,
// lock_not_available (lock_timeout) and query_canceled (statement_timeout),
// from any driver whose errors have a SQLState() string method, as pgx's
// do.
func PostgreSQL() Dialect { return postgresDialect{} }

type sqliteDialect struct{}

func (sqliteDialect) Name() string               { return "sqlite" }
func (sqliteDialect) Rebind(query string) string { return query }
func (sqliteDialect) Migrations() fs.FS          { return sub("sqlite") }
func (sqliteDialect) MigrationLock() string      { return "" }
func (sqliteDialect) Placeholder(n int) string   { return "?" + strconv.Itoa(n) }

func (sqliteDialect) IsConflict(err error) bool {
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

type postgresDialect struct{}

func (postgresDialect) Name() string               { return "postgres" }
func (postgresDialect) Rebind(query string) string { return rebindDollar(query) }
func (postgresDialect) Migrations() fs.FS          { return sub("postgres") }
func (postgresDialect) Placeholder(n int) string   { return "$" + strconv.Itoa(n) }

func (postgresDialect) IsConflict(err error) bool {
	var pe interface{ SQLState() string }
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.SQLState() {
	case "40001", // serialization_failure
		"40P01", // deadlock_detected
		"55P03", // lock_not_available (lock_timeout)
		"57014": // query_canceled (statement_timeout)
		return true
	}
	return false
}

// MigrationLock takes a transaction-scoped advisory lock, released by the
// commit, so a second process waits and then finds the migrations applied.
// The key is an arbitrary constant ("spool" in ASCII).
func (postgresDialect) MigrationLock() string {
	return "SELECT pg_advisory_xact_lock(495807590252)"
}

func sub(engine string) fs.FS {
	f, err := fs.Sub(migrations, "migrations/"+engine)
	if err != nil {
		// fs.Sub fails only for an invalid path, and these are constants.
		panic(err)
	}
	return f
}

// rebindDollar numbers the ? placeholders of query as $1, $2, ..., skipping
// those inside '...' literals, "..." identifiers and -- comments.
func rebindDollar(query string) string {
	var b strings.Builder
	b.Grow(len(query) + 8)
	n := 0
	var quote byte // the quote character we are inside, or 0
	comment := false
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case comment:
			if c == '\n' {
				comment = false
			}
		case quote != 0:
			if c == quote {
				quote = 0 // a doubled quote re-enters at once on the next byte
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '-' && i+1 < len(query) && query[i+1] == '-':
			comment = true
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
