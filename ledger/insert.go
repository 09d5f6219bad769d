package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"strings"
)

// rowsPerInsert is the most rows one INSERT carries: 128 rows of 16 columns
// stay far below the bind-parameter limits of SQLite (32766), PostgreSQL
// and MySQL (65535), while a 256-message batch needs only a few statements
// a table.
const rowsPerInsert = 128

const (
	processedColumns   = 13
	deliveryColumns    = 16
	reservationColumns = 5
)

// multiRow is a multi-row INSERT, prepared once when the ledger opens in
// one form for each power of two of rows up to rowsPerInsert: a batch's
// rows go out as a few of those forms (100 rows as 64+32+4), and no
// statement is parsed while a batch commits. Parsing a statement of
// hundreds of placeholders costs as much as running it: the one form
// parsed per use for a batch's odd remainder was 5% of a drain's processor
// time. The forms must be prepared before any transaction runs: preparing
// on the pool while a transaction holds one connection and another waits
// for SQLite's write lock would deadlock the pool.
//
// The same holds for a lookup by a list of keys (WHERE k IN (...)), which
// is a multiRow of one column.
//
// With pad, the rows that remain after the largest forms go out in one
// statement, the next larger form, filled up with copies of the last
// row: for statements to which a repeated row changes nothing (INSERT ...
// ON CONFLICT DO NOTHING, WHERE k IN (...)). On PostgreSQL each statement
// is a round trip to the server, which costs more than the extra rows; on
// SQLite a statement is a function call, and the extra rows would cost
// more than they save.
type multiRow struct {
	cols  int
	forms []*sql.Stmt // forms[k] takes 1<<k rows
	pad   bool
	// order, when set, puts a piece's arguments in the order of the
	// statement's placeholders (Positional), from row order.
	order func(piece []any) []any
	// arrays, when set, is the one form that takes every row at once as
	// an array per column (ColumnArrays); split then uses it alone.
	arrays *sql.Stmt
}

// prepareArrays prepares m's form of column arrays, text, when the
// dialect has one (ColumnArrays): head followed by the dialect's row
// source for kinds, completed by done.
func (m *multiRow) prepareArrays(ctx context.Context, db *sql.DB, d Dialect, head string, kinds []Kind, done func(string) string) error {
	ca, ok := d.(ColumnArrays)
	if !ok {
		return nil
	}
	if len(kinds) != m.cols {
		return fmt.Errorf("%d kinds for %d columns", len(kinds), m.cols)
	}
	st, err := db.PrepareContext(ctx, d.Rebind(done(head+"\n"+ca.Rows(kinds))))
	if err != nil {
		return err
	}
	m.arrays = st
	return nil
}

// columns turns args, rows of cols values one after another, into one
// []any per column, for a form of column arrays.
func columns(args []any, cols int) []any {
	n := len(args) / cols
	out := make([]any, cols)
	for c := range cols {
		col := make([]any, n)
		for r := range n {
			col[r] = args[r*cols+c]
		}
		out[c] = col
	}
	return out
}

// newMultiRow prepares text(n), rebound for d, for each power of two n up
// to rowsPerInsert.
func newMultiRow(ctx context.Context, db *sql.DB, d Dialect, cols int, text func(n int) string) (*multiRow, error) {
	m := &multiRow{cols: cols}
	for n := 1; n <= rowsPerInsert; n *= 2 {
		st, err := db.PrepareContext(ctx, d.Rebind(text(n)))
		if err != nil {
			return nil, errors.Join(err, m.close())
		}
		m.forms = append(m.forms, st)
	}
	return m, nil
}

// insertText is the INSERT of n rows of cols columns between head and tail.
func insertText(head string, cols int, tail string) func(n int) string {
	return func(n int) string {
		tuple := "(" + placeholders(cols) + ")"
		var b strings.Builder
		b.WriteString(head)
		b.WriteString("\nVALUES ")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(tuple)
		}
		b.WriteString(tail)
		return b.String()
	}
}

// split cuts args into the prepared forms' sizes, largest first, and calls
// fn with each piece and its statement.
func (m *multiRow) split(args []any, fn func(st *sql.Stmt, piece []any) error) error {
	if m.arrays != nil {
		if len(args) == 0 {
			return nil
		}
		return fn(m.arrays, columns(args, m.cols))
	}
	for len(args) > 0 {
		n := len(args) / m.cols
		k := min(bits.Len(uint(n))-1, len(m.forms)-1)
		if m.pad && n < 1<<(len(m.forms)-1) && n&(n-1) != 0 {
			k++
			last := args[len(args)-m.cols:]
			padded := make([]any, 0, (1<<k)*m.cols)
			padded = append(padded, args...)
			for range 1<<k - n {
				padded = append(padded, last...)
			}
			args = padded
		}
		size := (1 << k) * m.cols
		piece := args[:size]
		if m.order != nil {
			piece = m.order(piece)
		}
		if err := fn(m.forms[k], piece); err != nil {
			return err
		}
		args = args[size:]
	}
	return nil
}

// query runs the statement for len(args)/cols rows in tx and calls row for
// each row it returns.
func (m *multiRow) query(ctx context.Context, tx *sql.Tx, args []any, row func(*sql.Rows) error) error {
	return m.split(args, func(st *sql.Stmt, piece []any) error {
		rows, err := tx.StmtContext(ctx, st).QueryContext(ctx, piece...)
		if err != nil {
			return err
		}
		for rows.Next() {
			if err := row(rows); err != nil {
				return errors.Join(err, rows.Close())
			}
		}
		return errors.Join(rows.Err(), rows.Close())
	})
}

// ids runs query for a statement whose rows are a single msg_id each (an
// INSERT … RETURNING msg_id: the rows the PRIMARY KEY let in) and returns
// the set of them.
func (m *multiRow) ids(ctx context.Context, tx *sql.Tx, args []any) (map[string]bool, error) {
	set := make(map[string]bool, len(args)/m.cols)
	err := m.query(ctx, tx, args, func(rows *sql.Rows) error {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		set[id] = true
		return nil
	})
	return set, err
}

// exec is query for a statement without results.
func (m *multiRow) exec(ctx context.Context, tx *sql.Tx, args []any) error {
	return m.split(args, func(st *sql.Stmt, piece []any) error {
		_, err := tx.StmtContext(ctx, st).ExecContext(ctx, piece...)
		return err
	})
}

func (m *multiRow) close() error {
	if m == nil {
		return nil
	}
	var errs []error
	if m.arrays != nil {
		errs = append(errs, m.arrays.Close())
	}
	for _, st := range m.forms {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

// insertNew is the INSERT of n rows of cols columns after head that skips
// the rows whose key is already in the table and returns the returning
// column of those it inserted (Dialect.InsertNew).
func insertNew(d Dialect, head string, cols int, key, returning string) func(n int) string {
	text := insertText(head, cols, "")
	return func(n int) string { return d.InsertNew(text(n), key, returning) }
}

// unzipPairs reorders the (msg_id, claim) pairs of piece as every msg_id
// then every claim, for delReservations on an engine with positional
// placeholders.
func unzipPairs(piece []any) []any {
	out := make([]any, len(piece))
	half := len(piece) / 2
	for i := 0; i < half; i++ {
		out[i], out[half+i] = piece[2*i], piece[2*i+1]
	}
	return out
}

// insProcessed is the head of the INSERT of processed rows, whose values
// appendProcessed gives in this order and of the kinds processedKinds.
const insProcessed = `INSERT INTO processed
    (msg_id, order_no, seq, amount, processed_at, file, content_hash, payload, claim, ino, schema_version, traceparent, tenant)`

var processedKinds = []Kind{Text, Text, Int, Text, Text, Text, Text, Text, Text, Int, Text, Text, Text}

// prepareInserts prepares the multi-row INSERTs of Record. I2: the PRIMARY
// KEY, not application code, decides which rows go into processed;
// the statement returns the msg_ids it let in, on every engine
// (Dialect.InsertNew).
func (db *DB) prepareInserts(ctx context.Context) error {
	var err error
	db.insProcessed, err = newMultiRow(ctx, db.sql, db.dialect, processedColumns, insertNew(db.dialect, insProcessed,
		processedColumns, "msg_id", "msg_id"))
	if err == nil {
		err = db.insProcessed.prepareArrays(ctx, db.sql, db.dialect, insProcessed, processedKinds,
			func(s string) string { return db.dialect.InsertNew(s, "msg_id", "msg_id") })
	}
	if err != nil {
		return fmt.Errorf("prepare insert processed: %w", err)
	}
	if db.dialect.SingleWriter() {
		db.insProcessedLocked, err = newMultiRow(ctx, db.sql, db.dialect, processedColumns, insertNew(db.dialect, insProcessed,
			processedColumns, "msg_id", ""))
		if err != nil {
			return fmt.Errorf("prepare insert processed: %w", err)
		}
	}
	const insDeliveries = `INSERT INTO deliveries
    (claim, file, ino, consumer, msg_id, outcome, reason, field, detail, content_hash, size, at,
     attempts, first_failure, last_failure, conflict)`
	db.insDeliveries, err = newMultiRow(ctx, db.sql, db.dialect, deliveryColumns, insertText(insDeliveries, deliveryColumns, ""))
	if err == nil {
		err = db.insDeliveries.prepareArrays(ctx, db.sql, db.dialect, insDeliveries,
			[]Kind{Text, Text, Int, Text, Text, Text, Text, Text, Text, Text, Int, Text, Int, Text, Text, Int},
			func(s string) string { return s })
	}
	if err != nil {
		return fmt.Errorf("prepare insert deliveries: %w", err)
	}
	db.selOwners, err = newMultiRow(ctx, db.sql, db.dialect, 1, func(n int) string {
		return "SELECT msg_id, content_hash, claim FROM processed WHERE msg_id IN (" + placeholders(n) + ")"
	})
	if err != nil {
		return fmt.Errorf("prepare select duplicates' owners: %w", err)
	}
	db.insReservations, err = newMultiRow(ctx, db.sql, db.dialect, reservationColumns, insertNew(db.dialect,
		`INSERT INTO reservations (msg_id, claim, owner, at, call_bound_us)`, reservationColumns, "msg_id", "msg_id"))
	if err != nil {
		return fmt.Errorf("prepare insert reservations: %w", err)
	}
	// By (msg_id, claim) pairs: a settle removes its own reservations only
	// (the claim), found through the primary key (the msg_id), since
	// reservations has no index on claim and a scan of it per commit
	// would grow with every call in flight (and with PostgreSQL's dead
	// rows of a table written and emptied all the time). A claim is one
	// delivery of one msg_id, so the two lists match the same rows as
	// the pairs do.
	db.delReservations, err = newMultiRow(ctx, db.sql, db.dialect, 2, func(n int) string {
		var ids, claims []string
		for i := range n {
			ids = append(ids, db.dialect.Placeholder(2*i+1))
			claims = append(claims, db.dialect.Placeholder(2*i+2))
		}
		return "DELETE FROM reservations WHERE msg_id IN (" + strings.Join(ids, ", ") +
			") AND claim IN (" + strings.Join(claims, ", ") + ")"
	})
	if err != nil {
		return fmt.Errorf("prepare delete reservations: %w", err)
	}
	if Positional(db.dialect) {
		// The pairs' msg_ids, then their claims, as the placeholders
		// appear.
		db.delReservations.order = unzipPairs
	}
	db.delAttempts, err = newMultiRow(ctx, db.sql, db.dialect, 1, func(n int) string {
		return "DELETE FROM attempts WHERE msg_id IN (" + placeholders(n) + ")"
	})
	if err != nil {
		return fmt.Errorf("prepare delete attempts: %w", err)
	}
	if db.dialect.PadRows() {
		// Statements that a repeated row leaves as they are; not
		// insDeliveries, whose UNIQUE claim would refuse the copy.
		for _, m := range []*multiRow{db.insProcessed, db.selOwners, db.insReservations, db.delReservations, db.delAttempts} {
			m.pad = true
		}
	}
	return nil
}
