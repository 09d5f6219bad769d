package ledger

import (
	"embed"
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
	// Placeholder is the engine's numbered parameter n, from 1, for
	// statements that use one value in several places: ?1 on SQLite, $1 on
	// PostgreSQL.
	Placeholder(n int) string
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
// write transactions that the backend must begin with BEGIN IMMEDIATE.
func SQLite() Dialect { return sqliteDialect{} }

// PostgreSQL returns the dialect of PostgreSQL 15 or later: $1, $2, ...
// placeholders, and an advisory lock serialising migrations.
func PostgreSQL() Dialect { return postgresDialect{} }

type sqliteDialect struct{}

func (sqliteDialect) Name() string               { return "sqlite" }
func (sqliteDialect) Rebind(query string) string { return query }
func (sqliteDialect) Placeholder(n int) string   { return "?" + strconv.Itoa(n) }
func (sqliteDialect) Migrations() fs.FS          { return sub("sqlite") }
func (sqliteDialect) MigrationLock() string      { return "" }

type postgresDialect struct{}

func (postgresDialect) Name() string               { return "postgres" }
func (postgresDialect) Rebind(query string) string { return rebindDollar(query) }
func (postgresDialect) Placeholder(n int) string   { return "$" + strconv.Itoa(n) }
func (postgresDialect) Migrations() fs.FS          { return sub("postgres") }

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
