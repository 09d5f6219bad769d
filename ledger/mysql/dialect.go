package mysql

import (
	"embed"
	"errors"
	"io/fs"
	"strings"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool/ledger"
)

//go:embed migrations/*.up.sql
var migrations embed.FS

// maxKey is the longest msg_id the schema keeps, in bytes: its key columns
// are VARBINARY(1024).
const maxKey = 1024

// Dialect returns the ledger.Dialect of MariaDB 10.5 or later (for INSERT
// ... RETURNING): positional ? placeholders, sessions in sql_mode ANSI_QUOTES
// and PIPES_AS_CONCAT (set by Open), INSERT IGNORE for the inserts that
// skip present keys. Its conflicts are the server errors 1213 (deadlock)
// and 1205 (lock wait timeout), as go-sql-driver/mysql's *MySQLError
// reports them.
func Dialect() ledger.Dialect { return dialect{} }

type dialect struct{}

func (dialect) Name() string               { return Scheme }
func (dialect) Rebind(query string) string { return query }

// LooseIndexScan: a GROUP BY of a prefix of an index jumps from group to
// group (ledger.LooseIndexScan); a recursive skip scan would read the
// whole index at each step.
func (dialect) LooseIndexScan() {}

// Placeholder: MariaDB's placeholders are positional only.
func (dialect) Placeholder(int) string { return "?" }

// SingleWriter: InnoDB transactions lock rows and run side by side.
func (dialect) SingleWriter() bool { return false }

// PadRows: every statement is a round trip to the server.
func (dialect) PadRows() bool { return true }

// MaxKey is the key columns' width.
func (dialect) MaxKey() int { return maxKey }

// ImplicitCommit: MariaDB commits the open transaction before DDL and
// some administrative statements (ledger.ImplicitCommit).
func (dialect) ImplicitCommit() {}

// MigrationLock is empty: DDL commits by itself on MariaDB, so no
// transaction can hold a lock across a migration; Open takes a named lock
// (GET_LOCK) on a connection of its own around the migration instead.
func (dialect) MigrationLock() string { return "" }

func (dialect) Migrations() fs.FS {
	f, err := fs.Sub(migrations, "migrations")
	if err != nil {
		// fs.Sub fails only for an invalid path, and this is a constant.
		panic(err)
	}
	return f
}

// InsertNew is INSERT IGNORE: MariaDB has no ON CONFLICT, and the
// RETURNING of an INSERT ... ON DUPLICATE KEY UPDATE returns the rows it
// skipped too, where INSERT IGNORE's returns only those it inserted. IGNORE
// also turns some other errors into warnings (a value too long is cut
// short): the ledger never sends one, as msg_ids longer than MaxKey are
// dead letters before any insert and claims are refused, order keys and
// amounts are within spool.MaxKeyLen and spool.MaxAmountLen (Contract.Parse,
// and the ledger's screen) where their BLOBs hold 65 535 bytes, the
// headers within spool.MaxHeaderLen, and the payload is a LONGBLOB.
func (dialect) InsertNew(insert, key, returning string) string {
	s := strings.Replace(insert, "INSERT INTO", "INSERT IGNORE INTO", 1)
	if returning != "" {
		s += "\nRETURNING " + returning
	}
	return s
}

// InsertOrUpdate is ON DUPLICATE KEY UPDATE, with VALUES(c) for the row
// that was to be inserted.
func (dialect) InsertOrUpdate(insert, key string, update []string) string {
	set := make([]string, len(update))
	for i, c := range update {
		set[i] = c + " = VALUES(" + c + ")"
	}
	return insert + "\nON DUPLICATE KEY UPDATE " + strings.Join(set, ", ")
}

// errNoTimeout says why MariaDB refuses a statement timeout.
var errNoTimeout = errors.New("MariaDB bounds statements only by session settings (max_statement_time, innodb_lock_wait_timeout), which a failed message's rollback to its savepoint would not take back, so the rest of the batch would run under the handler's bound; set them on the server instead")

// StatementTimeout is refused; see errNoTimeout.
func (dialect) StatementTimeout(time.Duration) (string, string, error) {
	return "", "", errNoTimeout
}

// The server's error numbers the dialect classifies.
const (
	erLockWaitTimeout = 1205
	erLockDeadlock    = 1213
)

// number is the server error number of err, 0 when it is not one.
func number(err error) uint16 {
	var me *driver.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// IsMissingTable: ER_NO_SUCH_TABLE.
func (dialect) IsMissingTable(err error) bool { return number(err) == 1146 }

// IsConflict: a deadlock (InnoDB rolled the transaction back) or a lock
// wait that timed out (the statement was rolled back).
func (dialect) IsConflict(err error) bool {
	switch number(err) {
	case erLockDeadlock, erLockWaitTimeout:
		return true
	}
	return false
}

// Retry: InnoDB picks a deadlock victim and rolls it back whole, and
// not every lock the ledger's statements take is in msg_id order (those
// on secondary indexes, the next-key locks of a duplicate key met by
// INSERT IGNORE); running the victim again is all there is to do. A lock
// wait timeout is retried too: the ledger rolls the transaction back,
// and the wait may not come again. (The conformance tests' concurrent
// writers met neither; the retry is for the loads they do not make.)
func (d dialect) Retry(err error) bool { return d.IsConflict(err) }

// Leases: by the server's clock (NOW(6), in the session's time zone, which
// every comparison shares); LOCK IN SHARE MODE holds a lease row against
// its takeover until the write commits.
func (dialect) Leases() (ledger.LeaseSQL, bool) {
	return ledger.LeaseSQL{
		Now:   "NOW(6)",
		Later: "NOW(6) + INTERVAL ? MICROSECOND",
		Share: "LOCK IN SHARE MODE",
	}, true
}

// Snapshot: a MariaDB ledger is backed up with the server's own tools.
func (dialect) Snapshot() ledger.Snapshot { return ledger.Snapshot{Tool: "mariadb-dump"} }
