package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/spoolq/spool"
)

// TimeLayout is the layout of every timestamp column: UTC, fixed width, with
// microseconds. Fixed width makes text order time order on every engine and
// collation, so the columns can stay TEXT and read the same everywhere.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// ErrBadDelivery is wrapped by Record for a delivery the consumer filled in
// wrongly: no claim, neither or both of Message and Reject, an empty msg_id,
// or a Reject without a Reason (I4 needs one). Nothing of the batch is
// committed.
var ErrBadDelivery = errors.New("bad delivery")

// DB is a ledger on a SQL database. DB itself opens, migrates, names
// and describes it; what each of its users reads and writes is in a store
// reached by an accessor: the consumer's spool.Ledger (Consumer), and
// what commands and reports need (Audit, Outbox, Tasks, Replays,
// Discards, DeadLetters, Holding, Messages, Fsck, Backup).
// It is safe for concurrent use, by goroutines and by processes sharing
// the database, and so are its stores.
type DB struct {
	sql     *sql.DB
	dialect Dialect
	q       queries
	closed  atomic.Bool

	// Prepared when the ledger opens: see multiRow.
	insProcessed, insDeliveries, selOwners *multiRow
	// insProcessedLocked is insProcessed without RETURNING, on a
	// single-writer engine only (recordWith); nil on the others.
	insProcessedLocked *multiRow
	// For external handlers (reserve.go).
	insReservations, delReservations, delAttempts *multiRow
	// settleOneStmt is settleOne's statement, or nil where the dialect
	// has none (WritableWith).
	settleOneStmt *sql.Stmt
	// recordOneStmt is recordOne's statement, or nil where the dialect
	// has no writable WITH (recordOneText).
	recordOneStmt *sql.Stmt
	// writeTurn, on a single-writer engine (Dialect.SingleWriter), holds
	// a token while one of the process's write transactions runs
	// (beginWrite); nil on the others.
	writeTurn chan struct{}
	turn      Turn // Options.Turn, or nil
	// lease holds the sessions' leases, where the engine keeps them
	// (lease.go).
	lease *leases
}

// ErrNoLedger is wrapped by New, with Options.MustExist, for a database
// that holds no ledger yet (on a Dialect that is a MissingTable, only
// when its schema_migrations table is missing, not when it cannot be read).
var ErrNoLedger = errors.New("no ledger in this database")

// Options tune New. The zero value creates or migrates the ledger.
type Options struct {
	// MustExist refuses a database that holds no ledger yet (no
	// schema_migrations table) with ErrNoLedger, instead of creating the
	// schema: reports and checks read a ledger, and must not leave an empty
	// one behind a mistyped address. An existing ledger is still migrated.
	MustExist bool
	// ReadOnly refuses a ledger whose schema is not up to date instead of
	// migrating it: a reader that may not write must not try.
	ReadOnly bool
	// Turn, when set, is taken by the write transactions of Record,
	// Reserve and Settle (after the process's own turn, see beginWrite),
	// and closed by Close; the DB owns it once New succeeds.
	Turn Turn
}

// Turn is a lock that the write transactions of the processes sharing a
// database take turns on before they begin: ledger/sqlite's is an flock
// on a file beside the database, so that the writers of several consumer
// processes queue in the kernel, each woken as soon as the one before it
// commits, instead of polling in SQLite's busy handler with sleeps of up
// to 100 ms.
type Turn interface {
	// Take waits for the turn and returns the function that ends it.
	// It cannot fail: when it cannot lock, it returns at once with a
	// release that does nothing, and the engine's own locking, which is
	// what keeps writers apart, decides alone.
	Take() (release func())
	// Close releases what the lock holds open.
	Close() error
}

// New returns a ledger on db, whose engine is d, after bringing its schema
// up to date (unless o says otherwise): in one transaction, it applies the
// dialect's migrations not yet listed in schema_migrations, which is
// idempotent and safe when several processes open the ledger at once (the
// transaction holds the write lock, SQLite, or an advisory lock,
// PostgreSQL, from its first statement, so a second migrator waits and
// then finds nothing to do). The ledger owns db
// from then on: Close closes it. On error the caller still owns db.
//
// db's write transactions must take the write lock when they begin
// (SQLite: BEGIN IMMEDIATE), or concurrent writers can fail with
// SQLITE_BUSY instead of waiting; ledger/sqlite.Open sets this up.
func New(ctx context.Context, db *sql.DB, d Dialect, o Options) (*DB, error) {
	if o.MustExist {
		if _, err := upToDate(ctx, db, nil); err != nil {
			if m, ok := d.(MissingTable); ok && !m.IsMissingTable(err) {
				return nil, fmt.Errorf("new %s ledger: read schema_migrations: %w", d.Name(), err)
			}
			return nil, fmt.Errorf("new %s ledger: %w (%v)", d.Name(), ErrNoLedger, err)
		}
	}
	if o.ReadOnly {
		ms, err := loadMigrations(d.Migrations())
		if err != nil {
			return nil, fmt.Errorf("new %s ledger: %w", d.Name(), err)
		}
		current, err := upToDate(ctx, db, ms)
		if err != nil {
			return nil, fmt.Errorf("new %s ledger: read schema_migrations: %w", d.Name(), err)
		}
		if !current {
			return nil, fmt.Errorf("new %s ledger: the schema is older than this spool's, and a reader does not migrate it: run a consumer or fsck --repair first", d.Name())
		}
	} else if err := migrate(ctx, db, d); err != nil {
		return nil, fmt.Errorf("new %s ledger: migrate: %w", d.Name(), err)
	}
	l := &DB{sql: db, dialect: d, q: newQueries(d), turn: o.Turn, lease: newLeases(d)}
	if d.SingleWriter() {
		// One writer at a time per database.
		l.writeTurn = make(chan struct{}, 1)
	}
	err := l.prepareInserts(ctx)
	if err == nil {
		err = l.prepareOne(ctx)
	}
	if err != nil {
		_ = l.closeStmts() // the error that matters is prepare's
		return nil, fmt.Errorf("new %s ledger: %w", d.Name(), err)
	}
	return l, nil
}

func (db *DB) closeStmts() error {
	return errors.Join(db.insProcessed.close(), db.insProcessedLocked.close(), db.insDeliveries.close(), db.selOwners.close(),
		db.insReservations.close(), db.delReservations.close(), db.delAttempts.close(), db.closeOne())
}

// SQL returns the underlying database, for reports and checks that need
// plain SQL (PRAGMAs, the operator views). Writes through it bypass the
// ledger's invariants.
func (db *DB) SQL() *sql.DB { return db.sql }

// Dialect returns the engine the ledger runs on.
func (db *DB) Dialect() Dialect { return db.dialect }

// Close closes the database. Every later call returns spool.ErrLedgerClosed;
// closing again is a no-op.
func (db *DB) Close() error {
	if db.closed.Swap(true) {
		return nil
	}
	var turnErr error
	if db.turn != nil {
		turnErr = db.turn.Close()
	}
	if err := errors.Join(db.closeStmts(), db.sql.Close(), turnErr); err != nil {
		return fmt.Errorf("close ledger: %w", err)
	}
	return nil
}

// open reports spool.ErrLedgerClosed after Close.
func (db *DB) open() error {
	if db.closed.Load() {
		return spool.ErrLedgerClosed
	}
	return nil
}

// fail wraps err with the operation, turning database/sql's "database is
// closed" (after a Close that raced the call) into spool.ErrLedgerClosed.
func (db *DB) fail(op string, err error) error {
	if db.closed.Load() {
		return fmt.Errorf("%s: %w", op, spool.ErrLedgerClosed)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// queryAll runs query with args and returns scan of each of its rows, in
// order, the rows closed (their connection free for the next query), as
// eachRow reads them.
func queryAll[T any](ctx context.Context, db *DB, op, query string, args []any, scan func(*sql.Rows) (T, error)) ([]T, error) {
	var out []T
	err := eachRow(ctx, db, op, query, args, scan, func(v T) error {
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachRow runs query with args and calls fn with scan of each of its
// rows, in order, streaming: the rows are never all in memory. A closed
// ledger returns spool.ErrLedgerClosed, as DB.open; the query's, scan's
// and the rows' errors read "op: …" through db.fail, so that a read cut
// short by Close says spool.ErrLedgerClosed too; fn's are returned as
// they are, and end the read.
func eachRow[T any](ctx context.Context, db *DB, op, query string, args []any, scan func(*sql.Rows) (T, error), fn func(T) error) error {
	if err := db.open(); err != nil {
		return err
	}
	rows, err := db.sql.QueryContext(ctx, query, args...)
	if err != nil {
		return db.fail(op, err)
	}
	defer rows.Close() // on an early return; Close again below is a no-op
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return db.fail(op, err)
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return db.fail(op, err)
	}
	return nil
}

// Record commits batch in one transaction, with w's business work in it,
// and returns what became of each delivery, results[i] for batch[i]; see
// spool.Ledger. On error nothing of
// the batch is committed and there are no results. When it returns a nil
// error the commit is as durable as the engine is configured to make it
// (I3: the SQLite backend syncs every commit). The deliveries are not
// modified.
//
// Deliveries are applied in slice order as far as anyone can observe: of two
// deliveries of one msg_id the earlier is processed and the later is a
// duplicate. The processed inserts themselves run in msg_id order, so that
// two batches sharing msg_ids lock them in the same order and cannot deadlock
// on PostgreSQL.
func (l Consumer) Record(ctx context.Context, batch []*spool.Delivery, w spool.Work) ([]spool.Result, error) {
	if err := l.db.open(); err != nil {
		return nil, err
	}
	if w.Handler != nil && w.Decide == nil {
		return nil, errors.New("record batch: work has a handler but no Decide")
	}
	for i, d := range batch {
		if err := l.db.checkDelivery(d); err != nil {
			return nil, fmt.Errorf("record batch: delivery %d: %w", i, err)
		}
	}
	if len(batch) == 0 {
		return nil, nil
	}
	res, err := l.db.record(ctx, l.db.screenKeys(batch), w)
	if err != nil {
		return nil, l.db.fail("record batch", err)
	}
	out := make([]spool.Result, len(batch))
	for i, d := range batch {
		out[i] = res[i].public(d)
	}
	return out, nil
}

// ClaimOutcome returns the outcome recorded for claim, and false when the
// claim was never recorded; see spool.Ledger. A processed claim is the one
// named by its msg_id's processed row; any other outcome has a deliveries
// row keyed by the claim.
func (l Consumer) ClaimOutcome(ctx context.Context, claim, msgID string) (spool.Outcome, bool, error) {
	if err := l.db.open(); err != nil {
		return "", false, err
	}
	if msgID != "" {
		var owner string
		err := l.db.sql.QueryRowContext(ctx, l.db.q.processedClaim, msgID).Scan(&owner)
		switch {
		case err == nil && owner == claim:
			return spool.OutcomeProcessed, true, nil
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return "", false, l.db.fail("claim outcome "+claim, err)
		}
	}
	var o string
	err := l.db.sql.QueryRowContext(ctx, l.db.q.claimOutcome, claim).Scan(&o)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, l.db.fail("claim outcome "+claim, err)
	}
	return spool.Outcome(o), true, nil
}

// ClaimReject returns the reason recorded for the dead letter of claim,
// with its msg_id when the record has one, and false when the claim is
// not recorded as one; see spool.Ledger.
func (l Consumer) ClaimReject(ctx context.Context, claim string) (*spool.RejectError, bool, error) {
	if err := l.db.open(); err != nil {
		return nil, false, err
	}
	var reason, field, detail, msgID sql.NullString
	err := l.db.sql.QueryRowContext(ctx, l.db.q.claimReject, claim).Scan(&reason, &field, &detail, &msgID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, l.db.fail("claim reject "+claim, err)
	}
	return &spool.RejectError{Reason: spool.Reason(reason.String), Field: field.String, Detail: detail.String, MsgID: msgID.String}, true, nil
}

func formatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

func parseTime(column, s string) (time.Time, error) {
	t, err := time.Parse(TimeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("column %s: %w", column, err)
	}
	return t, nil
}

// nullString stores an absent optional value as NULL rather than ”.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullInt stores 0 (an absent seq) as NULL.
func nullInt(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}

// nullIno stores an unknown inode (0) as NULL, and the others as BIGINT:
// database/sql refuses uint64 values with the high bit set, so an inode
// above 2^63-1 is stored as the int64 with the same bits and read back the
// same way.
func nullIno(ino uint64) any {
	if ino == 0 {
		return nil
	}
	return int64(ino)
}

// clean makes descriptive text (file names, details) storable everywhere: a
// Unix file name may hold any byte but NUL, and PostgreSQL's TEXT refuses
// invalid UTF-8 and NUL, which would otherwise fail a whole batch for one
// oddly named file. Invalid bytes and NULs become U+FFFD. Identities (msg_id,
// claim) and payloads are never cleaned: they must stay exact.
func clean(s string) string {
	if utf8.ValidString(s) && !strings.Contains(s, "\x00") {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// RetrySchedule returns the msg_ids waiting for a retry and when each is
// due; see spool.Ledger.
func (l Consumer) RetrySchedule(ctx context.Context) (map[string]time.Time, error) {
	if err := l.db.open(); err != nil {
		return nil, err
	}
	rows, err := l.db.sql.QueryContext(ctx, l.db.q.retrySchedule)
	if err != nil {
		return nil, fmt.Errorf("retry schedule: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var id, next string
		if err := rows.Scan(&id, &next); err != nil {
			return nil, fmt.Errorf("retry schedule: %w", err)
		}
		t, err := parseTime("next_at", next)
		if err != nil {
			return nil, err
		}
		out[id] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("retry schedule: %w", err)
	}
	return out, nil
}
