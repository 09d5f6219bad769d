package postgres

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool/ledger"
)

//go:embed migrations/*.up.sql
var migrations embed.FS

// Dialect returns the ledger.Dialect of PostgreSQL 15 or later: $1, $2, ...
// placeholders, and an advisory lock serialising migrations. Its conflicts
// are the SQLSTATEs serialization_failure, deadlock_detected,
// lock_not_available (lock_timeout) and query_canceled (statement_timeout),
// from any driver whose errors have a SQLState() string method, as pgx's
// do.
func Dialect() ledger.Dialect { return dialect{} }

type dialect struct{}

func (dialect) Name() string               { return Scheme }
func (dialect) Rebind(query string) string { return rebindDollar(query) }
func (dialect) Placeholder(n int) string   { return "$" + strconv.Itoa(n) }

// SingleWriter: transactions lock rows and run side by side.
func (dialect) SingleWriter() bool { return false }

// PadRows: every statement is a round trip to the server.
func (dialect) PadRows() bool { return true }

// maxKey is the longest msg_id the ledger keeps, in bytes. TEXT has no
// length of its own, but a btree entry does: at most 2 704 bytes (a third
// of an 8 KiB page) with its header, and a longer one fails the whole
// statement ("index row size ... exceeds btree version 4 maximum 2704")
// unless the value happens to compress. 2 048 leaves room for the entry's
// header and a second column, whatever the key's content.
const maxKey = 2048

// MaxKey is maxKey: the key columns' btree entries, not TEXT, are the
// limit.
func (dialect) MaxKey() int { return maxKey }

// Retry: the ledger's write transactions run at READ COMMITTED, where
// there are no serialization failures, and lock keys in msg_id order, so
// they do not deadlock one another; a deadlock or a lock timeout is then
// a fault (another program's locks) to report, not a race to rerun.
func (dialect) Retry(error) bool { return false }

func (dialect) Migrations() fs.FS {
	f, err := fs.Sub(migrations, "migrations")
	if err != nil {
		// fs.Sub fails only for an invalid path, and this is a constant.
		panic(err)
	}
	return f
}

// MigrationLock takes a transaction-scoped advisory lock, released by the
// commit, so a second process waits and then finds the migrations applied.
// The key is an arbitrary constant ("spool" in ASCII).
func (dialect) MigrationLock() string {
	return "SELECT pg_advisory_xact_lock(495807590252)"
}

func (dialect) InsertNew(insert, key, returning string) string {
	s := insert + "\nON CONFLICT (" + key + ") DO NOTHING"
	if returning != "" {
		s += "\nRETURNING " + returning
	}
	return s
}

func (dialect) InsertOrUpdate(insert, key string, update []string) string {
	set := make([]string, len(update))
	for i, c := range update {
		set[i] = c + " = excluded." + c
	}
	return insert + "\nON CONFLICT (" + key + ") DO UPDATE SET " + strings.Join(set, ", ")
}

// StatementTimeout sets statement_timeout for the transaction (SET LOCAL),
// in whole milliseconds and at least one (0 would mean none); a savepoint's
// rollback takes the setting back with the rest. A statement cut short
// fails with query_canceled, a conflict.
func (dialect) StatementTimeout(d time.Duration) (string, string, error) {
	if d <= 0 {
		return "", "", fmt.Errorf("statement timeout %v: want a positive duration", d)
	}
	return fmt.Sprintf("SET LOCAL statement_timeout = %d", max(d.Milliseconds(), 1)),
		"SET LOCAL statement_timeout TO DEFAULT", nil
}

func (dialect) IsConflict(err error) bool {
	switch sqlState(err) {
	case "40001", // serialization_failure
		"40P01", // deadlock_detected
		"55P03", // lock_not_available (lock_timeout)
		"57014": // query_canceled (statement_timeout)
		return true
	}
	return false
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

// Leases: by the server's clock at each statement; a SELECT ... FOR SHARE
// holds a lease row against its takeover until the write commits.
func (dialect) Leases() (ledger.LeaseSQL, bool) {
	return ledger.LeaseSQL{
		Now:   "statement_timestamp()",
		Later: "statement_timestamp() + CAST(? AS bigint) * interval '1 microsecond'",
		Share: "FOR SHARE",
	}, true
}

// ResetSession: synchronous_commit, which a function a handler calls could
// turn off for the commit (I3), and search_path, which decides where the
// ledger's own tables are found, back to the session's own values, those
// its DSN and role gave it and check found durable. RESET, unlike SET
// LOCAL, also takes back a session-wide set_config that would otherwise
// outlive the commit. pgx sends a statement without arguments by the
// simple protocol, which takes several in one round trip.
func (dialect) ResetSession() string {
	return "RESET synchronous_commit; RESET search_path"
}

// Snapshot: a PostgreSQL ledger is backed up with the server's own tools.
func (dialect) Snapshot() ledger.Snapshot { return ledger.Snapshot{Tool: "pg_dump"} }

// IsMissingTable: undefined_table.
func (dialect) IsMissingTable(err error) bool { return sqlState(err) == "42P01" }

// KeyTaken: unique_violation.
func (dialect) KeyTaken(err error) bool { return sqlState(err) == "23505" }

// sqlState is the SQLSTATE of err, or "" when it carries none.
func sqlState(err error) string {
	var pe interface{ SQLState() string }
	if !errors.As(err, &pe) {
		return ""
	}
	return pe.SQLState()
}

// Rows: one array parameter per column, cast to the column's kind, so
// that a batch's rows for a table go in one statement of ten or sixteen
// parameters, prepared once, whatever their number: one round trip, and no
// plan of a VALUES list of hundreds of rows.
//
// Each array is unnested in the select list, not in FROM: the arrays,
// all of one length, then advance in step and each row goes straight to
// the INSERT, where unnest(a, b, ...) in FROM first copies every row into
// a tuplestore: the INSERT of processed rows cost the server 7.2-8.5 µs a
// row from the select list, 8.7-13.5 from FROM (measured at 90a0fa7:
// git log -p docs/PERFORMANCE.md, "The server's share on PostgreSQL").
func (dialect) Rows(kinds []ledger.Kind) string {
	cols := make([]string, len(kinds))
	for i, k := range kinds {
		t := "text[]"
		if k == ledger.Int {
			t = "bigint[]"
		}
		cols[i] = "unnest(CAST(? AS " + t + "))"
	}
	return "SELECT " + strings.Join(cols, ", ")
}
