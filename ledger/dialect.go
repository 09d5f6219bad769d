package ledger

import (
	"io/fs"
	"time"
)

// Dialect is the seam between SQL engines: everything that cannot be
// written once in the SQL that every engine speaks, and everything the
// ledger and its handlers decide differently per engine, is a method here.
// The queries themselves are shared. A backend package (ledger/sqlite,
// ledger/postgres) implements Dialect for its engine, embeds its
// migrations, and passes both to New; nothing in package ledger, nor in the
// handlers, names an engine, so a new engine is a new backend package and
// no change here.
type Dialect interface {
	// Name is the engine's name, for messages: "sqlite", "postgres". Code
	// must not switch on it; what differs between engines is asked of the
	// methods below.
	Name() string
	// Rebind rewrites a shared query's ? placeholders into the engine's
	// style. It must leave ? inside quoted literals alone.
	Rebind(query string) string
	// Placeholder is the engine's numbered placeholder for a query's n-th
	// argument, n from 1 ("?1" on SQLite, "$1" on PostgreSQL), for queries
	// that refer to one argument more than once. An engine whose
	// placeholders are positional only (MySQL's ?) returns "?" for every n:
	// the caller then passes the arguments in the order the placeholders
	// appear, repeating one referred to twice (see Positional).
	Placeholder(n int) string
	// IsConflict reports whether err is the engine telling of a conflict
	// with other work, which a later attempt may not meet (a lock held
	// elsewhere, a deadlock, a serialization failure, a timeout waiting for
	// one of them), rather than a fault of the statement or of its data.
	// It is the backend's one classification of such errors: a busy
	// database to retry, a handler's failure to call transient.
	IsConflict(err error) bool
	// Retry reports whether a write transaction of the ledger that failed
	// with err is to be run again from its beginning, at once: the engine
	// gave it up through no fault of its own (a deadlock victim that the
	// engine rolled back), and running it again changes nothing but the
	// outcome of the race. The ledger retries such a transaction a few
	// times before it reports the error. An engine whose write
	// transactions cannot lose such a race to the ledger's own statements
	// returns false, so that a real fault is reported at once.
	Retry(err error) bool
	// Migrations holds the engine's migration files at its root, named
	// NNN_name.up.sql and applied in NNN order. The backend package embeds
	// them.
	Migrations() fs.FS
	// MigrationLock is run first in the migration transaction so that
	// processes migrating at once take turns. Empty when the transaction
	// itself is already exclusive (SQLite begins write transactions with
	// BEGIN IMMEDIATE), or when the backend serialises its migrations
	// itself before New.
	MigrationLock() string
	// SingleWriter reports whether the engine admits one write
	// transaction at a time per database (SQLite): the ledger then has its
	// own write transactions take turns in the process, waiting without
	// polling, and tells the consumer it runs one write at a time
	// (ConcurrentWrites). False for an engine whose transactions lock rows
	// and run side by side.
	SingleWriter() bool
	// PadRows reports whether a multi-row statement for an odd number of
	// rows is better sent as the next larger prepared form, padded with
	// copies of its last row, than as several smaller statements: true
	// where each statement is a round trip to a server, false where it is a
	// function call (SQLite) and the extra rows cost more than they save.
	PadRows() bool
	// InsertNew completes insert, an INSERT INTO table (columns) VALUES
	// (...), ... statement with ? placeholders, so that each row whose
	// key (a column under a primary key or unique constraint) is already in
	// the table is skipped without error, and, when returning names a
	// column, the statement returns that column of the rows it inserted
	// and of no other. RowsAffected of the completed statement counts the
	// rows it inserted. (I2: the constraint, not application code, decides
	// which rows go in.)
	InsertNew(insert, key, returning string) string
	// InsertOrUpdate completes insert (as for InsertNew, one row) so that
	// when the row's key is already in the table, that row's columns
	// update are set from the row that was to be inserted instead.
	InsertOrUpdate(insert, key string, update []string) string
	// StatementTimeout returns the statements that bound each later
	// statement of the transaction to d (set, undone by a rollback to a
	// savepoint made before it, and by the transaction's end) and that
	// lift the bound again (reset), for a handler's statements run inside
	// the ledger's transaction. A statement that runs out is cancelled by
	// the engine with an error IsConflict reports. An engine that cannot
	// cut one statement short without harming the rest of the
	// transaction returns an error saying why, which the caller reports.
	StatementTimeout(d time.Duration) (set, reset string, err error)
	// MaxKey is the longest msg_id, in bytes, the engine's schema can
	// keep as a key (in every index that holds one), 0 for no limit below
	// the message's own. The ledger dead-letters a message whose msg_id is
	// longer (invalid-field), so that a key is never truncated into
	// another message's and never fails a whole batch, and refuses a
	// longer claim. When not 0 it is at least spool.MaxKeyLen, the limit
	// Contract.Parse keeps every message to.
	MaxKey() int
	// Leases returns how the engine keeps consumers' leases by its own
	// clock, for a ledger shared by hosts (see spool.Ledger); false
	// for an engine whose ledger is one host's (SQLite), where a
	// session's directory lock is its liveness.
	Leases() (LeaseSQL, bool)
	// Snapshot says how the engine copies a whole ledger into a file while
	// it is in use (spool backup), or which tool of the engine's own does
	// it instead.
	Snapshot() Snapshot
}

// Snapshot is how an engine copies a whole ledger into a new file.
type Snapshot struct {
	// Into is the statement, with one ? for the path of the file, that
	// writes a consistent copy of the whole database into that file, which
	// must be empty or absent (SQLite: VACUUM INTO ?): one read snapshot,
	// taken without stopping the writers. Empty when the engine has none.
	Into string
	// Check is a query that checks the integrity of a database and returns
	// one row "ok" when it is sound, or rows saying what is wrong (SQLite:
	// PRAGMA integrity_check). Empty when Into is.
	Check string
	// Tool names the engine's own tool that backs a ledger up when Into
	// is empty ("pg_dump"), for the operator to be told to use it.
	Tool string
}

// Positional reports whether d's placeholders are positional only, so that
// a statement's arguments go in the order its placeholders appear rather
// than by number.
func Positional(d Dialect) bool { return d.Placeholder(1) == d.Placeholder(2) }

// LeaseSQL is how an engine keeps consumers' leases by its own clock
// (Dialect.Leases): SQL fragments the ledger's lease statements are made
// of, with the shared statements around them.
type LeaseSQL struct {
	// Now is the database's clock, comparable with the leases table's
	// expires column.
	Now string
	// Later is Now plus the number of microseconds bound to its one ?
	// placeholder.
	Later string
	// Share, appended to a SELECT, makes it lock the rows it reads
	// against an UPDATE or DELETE of another transaction until its own
	// ends (FOR SHARE).
	Share string
}

// ColumnArrays is implemented by a Dialect whose engine takes the rows of
// a multi-row INSERT as one array parameter per column, in one statement
// whose text does not depend on the number of rows (PostgreSQL's unnest).
// The ledger then sends all of a batch's rows for a table in one
// statement, one round trip to the server, instead of the prepared forms
// of VALUES lists of a few sizes (multiRow). Engines without such arrays
// do not implement it.
type ColumnArrays interface {
	// Rows returns the row source that stands in an INSERT INTO table
	// (columns) where VALUES (...), ... would, with one ? placeholder per
	// column, in order, each bound to a []any of that column's values
	// (nil for NULL) of the given kind.
	Rows(kinds []Kind) string
}

// ImplicitCommit is implemented by a Dialect whose engine commits the open
// transaction before it runs DDL and some administrative statements
// (MariaDB: CREATE TABLE, ALTER, DROP, TRUNCATE, GRANT, ANALYZE TABLE
// ...), so that such a statement in a handler's SQL would commit the
// batch's business writes without the ledger's rows, and end the
// savepoints the handler runs in. A SQL handler refuses those statements
// on such an engine. Engines whose DDL is transactional do not implement
// it.
type ImplicitCommit interface {
	// ImplicitCommit marks the dialect; it does nothing.
	ImplicitCommit()
}

// LooseIndexScan is implemented by a Dialect whose engine reads the least
// entry of each group of an index by jumping from group to group itself
// (MariaDB's loose index scan, for a GROUP BY of a prefix of the index),
// and whose planner cannot bound an index range by a column of an outer
// query, which a skip scan written as a recursive query needs (it reads
// the whole group at each step instead). Outbox.Heads then groups the
// pending index rather than walking it. Engines without it do not
// implement it.
type LooseIndexScan interface {
	// LooseIndexScan marks the dialect; it does nothing.
	LooseIndexScan()
}

// WritableWith is implemented by a Dialect whose engine runs INSERTs and
// DELETEs inside the WITH clause of one statement (PostgreSQL), all of
// them against the rows as they were before the statement, and whose one
// statement outside a transaction is a transaction of its own, durable
// once it returns. A settle of calls that all succeeded, and a batch
// recorded without a handler, are then that one statement, one round trip
// to the server (settleOne, recordOne), where a transaction of its own is
// six: BEGIN, the fence, three statements, COMMIT.
type WritableWith interface {
	ColumnArrays
	// KeyTaken reports whether err is a statement's failure on a row
	// whose key the table held already (a unique violation): the
	// statement, with all it wrote, was undone.
	KeyTaken(err error) bool
}

// SessionReset is implemented by a Dialect whose engine lets any statement
// of a transaction change a setting of its session that the ledger relies
// on, by means no check of a handler's SQL can see (PostgreSQL: a function
// the handler calls runs set_config('synchronous_commit', 'off', false)),
// with the change holding for the rest of the transaction, its commit,
// and, once it commits, every later transaction of that connection. The
// ledger runs ResetSession right after each handler that succeeded, in
// the one Exec that releases the message's savepoint: the ledger's own
// statements then find its own tables, and the commit is as durable as
// the session was when it was checked at connection (I3). Engines whose
// such settings are the server's alone (MariaDB's
// innodb_flush_log_at_trx_commit), or that no statement of a script may
// change (SQLite's PRAGMAs, refused by handler.ParseSQL and out of reach
// of its functions), do not implement it.
type SessionReset interface {
	// ResetSession returns the SQL, without placeholders, that puts
	// those settings back to the session's own values (its DSN's, its
	// role's, the server's). It is sent after "RELEASE SAVEPOINT ...; "
	// in one Exec without arguments, which the engine's driver must run
	// as several statements.
	ResetSession() string
}

// MissingTable is implemented by a Dialect that can tell the engine's
// error for a table that does not exist from its other errors. New
// with Options.MustExist then reports ErrNoLedger only for a database
// that lacks the ledger's schema_migrations table, and any other failure
// to read it (a full disk, an I/O error, a permission) as itself: an
// operator told "no ledger" of a ledger the disk was too full to open
// would be steered to create a new one. Without it, every failure to read
// the table is ErrNoLedger.
type MissingTable interface {
	// IsMissingTable reports whether err is a statement's failure on a
	// table that does not exist.
	IsMissingTable(err error) bool
}

// Kind is a column's kind of value, for ColumnArrays.
type Kind int

// The kinds of column the ledger's multi-row statements write.
const (
	Text Kind = iota // a string
	Int              // a 64-bit integer
)
