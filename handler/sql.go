package handler

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// StatementError is a statement of a Script that the ledger's engine
// refused to prepare: a syntax error, a missing table.
type StatementError struct {
	// N numbers the statement in its file, from 1; Line is where it starts.
	N, Line int
	// Err is the engine's error, or why the engine cannot run the
	// statement inside the ledger's transaction (ledger.ImplicitCommit).
	Err error
}

func (e *StatementError) Error() string {
	return fmt.Sprintf("statement %d (line %d): %v", e.N, e.Line, e.Err)
}

func (e *StatementError) Unwrap() error { return e.Err }

// SQL runs a Script's statements for each message (spool consume --sql),
// inside the ledger's transaction: they commit together with the message's
// processed row, or roll back with it.
//
// A statement's failure is permanent (a constraint, a type, a missing
// table) unless the engine reports a conflict that a later attempt may not
// meet (ledger.Dialect's IsConflict: a lock held elsewhere, a deadlock, a
// serialization failure, a lock or statement timeout).
//
// A SQL is safe for concurrent use.
type SQL struct {
	dialect    ledger.Dialect
	statements []boundStatement
	// setTimeout and resetTimeout are the statements that set
	// SQLOptions.Timeout for a message's statements and lift it after
	// them (ledger.Dialect's StatementTimeout), "" for none.
	setTimeout, resetTimeout string
}

// SQLOptions are NewSQL's settings.
type SQLOptions struct {
	// Timeout bounds each statement, on an engine that can cut one short
	// (ledger.Dialect's StatementTimeout; PostgreSQL): the handler sets
	// the bound before a message's statements and lifts it after them, so
	// that a statement still running then is cancelled by the server, and
	// the message's failure is transient: its savepoint is rolled back, the
	// rest of the batch commits, and the message is retried. Zero: the
	// server's own bound, if any. An engine that cannot stop one statement
	// without harming the batch's transaction (SQLite, whose only way,
	// sqlite3_interrupt, rolls back the whole of it) has NewSQL refuse
	// a Timeout (ErrNoSQLTimeout).
	Timeout time.Duration
}

// ErrNoSQLTimeout is wrapped by NewSQL for a Timeout on a ledger
// whose engine cannot cut one statement short; the error says why.
var ErrNoSQLTimeout = errors.New("this ledger cannot bound a statement's time")

// TimeoutSupported reports whether l's engine can bound each statement of
// a SQL handler (SQLOptions.Timeout), and if not, why not: for a caller
// that applies a default timeout only where one is possible.
func TimeoutSupported(l *ledger.DB) error {
	if _, _, err := l.Dialect().StatementTimeout(time.Second); err != nil {
		return fmt.Errorf("%w: %w", ErrNoSQLTimeout, err)
	}
	return nil
}

// boundStatement is a statement with its placeholders in the engine's
// syntax.
type boundStatement struct {
	statement
	query string
	// args is, for each placeholder of query in order, the index in
	// params of its value: every parameter once, in params order, on an
	// engine with numbered placeholders; every appearance on one with
	// positional placeholders only (ledger.Positional).
	args []int
}

// NewSQL checks script against the ledger l and returns the handler that
// runs it in l's transactions, with o (the zero value: no statement
// timeout). Each statement is prepared in a transaction that is rolled
// back; those without parameters (CREATE TABLE IF NOT EXISTS...) are also
// run, each in a savepoint, so that the statements after them can refer to
// what they create. A statement that does not prepare is a
// *StatementError, and so is one the engine would run only by committing
// the ledger's transaction (ledger.ImplicitCommit: DDL on MariaDB).
func NewSQL(ctx context.Context, l *ledger.DB, script *Script, o SQLOptions) (*SQL, error) {
	d := l.Dialect()
	h := &SQL{dialect: d}
	switch {
	case o.Timeout < 0:
		return nil, fmt.Errorf("sql timeout %v: want a positive duration, or 0 for the server's", o.Timeout)
	case o.Timeout > 0:
		var err error
		if h.setTimeout, h.resetTimeout, err = d.StatementTimeout(o.Timeout); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoSQLTimeout, err)
		}
	}
	if _, ok := d.(ledger.ImplicitCommit); ok {
		for i, s := range script.statements {
			if err := implicitCommit(d.Name(), i+1, s); err != nil {
				return nil, err
			}
		}
	}
	for _, s := range script.statements {
		query, args := s.bind(d)
		h.statements = append(h.statements, boundStatement{statement: s, query: query, args: args})
	}
	tx, err := l.SQL().BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("check against the ledger: %w", err)
	}
	// Nothing of the check may stay.
	defer func() { _ = tx.Rollback() }()
	for i, s := range h.statements {
		if err := check(ctx, tx, i, s); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// check prepares statement i of a script in tx, and runs it if it has no
// parameters; see NewSQL.
func check(ctx context.Context, tx *sql.Tx, i int, s boundStatement) error {
	st, err := tx.PrepareContext(ctx, s.query)
	if err != nil {
		return &StatementError{N: i + 1, Line: s.line, Err: err}
	}
	if err := st.Close(); err != nil {
		return fmt.Errorf("statement %d: %w", i+1, err)
	}
	if len(s.params) > 0 {
		return nil
	}
	// Its failure is the data's business, found again per message; the
	// savepoint keeps it from aborting the check's transaction
	// (PostgreSQL).
	if _, err := tx.ExecContext(ctx, "SAVEPOINT spool_check"); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	undo := "RELEASE SAVEPOINT spool_check"
	if _, err := tx.ExecContext(ctx, s.query); err != nil {
		undo = "ROLLBACK TO SAVEPOINT spool_check"
	}
	if _, err := tx.ExecContext(ctx, undo); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	return nil
}

// Kind is "sql" (spool.Kinded), the handler kind metrics report.
func (h *SQL) Kind() string { return "sql" }

// Handle runs each statement in tx with its parameters bound to d: :msg_id,
// :order_no, :seq, :amount (NULL when the message lacks them), :file (its
// name in inbox/), :payload (the message's text), and any other :name the
// message's top-level field of that name (a string decoded, null as NULL,
// anything else its JSON text), or NULL when it has none.
func (h *SQL) Handle(ctx context.Context, tx *sql.Tx, d *spool.Delivery) error {
	m, file := d.Message, fileName(d)
	if h.setTimeout != "" {
		// Again for each message: the savepoint of a failed one takes
		// the setting back with its writes.
		if _, err := tx.ExecContext(ctx, h.setTimeout); err != nil {
			return fmt.Errorf("sql: set the statement timeout: %w", err)
		}
	}
	for i, s := range h.statements {
		values := make([]any, len(s.params))
		for k, name := range s.params {
			v, err := sqlParam(name, m, file)
			if err != nil {
				return spool.Permanent(fmt.Errorf("sql statement %d (line %d): parameter :%s: %w", i+1, s.line, name, err))
			}
			values[k] = v
		}
		args := make([]any, len(s.args))
		for k, p := range s.args {
			args[k] = values[p]
		}
		if _, err := tx.ExecContext(ctx, s.query, args...); err != nil {
			err = fmt.Errorf("sql statement %d (line %d): %w", i+1, s.line, err)
			if h.dialect.IsConflict(err) {
				return err
			}
			return spool.Permanent(err)
		}
	}
	if h.resetTimeout != "" {
		// The ledger's own statements after these (the rest of the batch,
		// its commit) wait as long as they did before: the bound is the
		// handler's. (After a failure, the savepoint's rollback restores it.)
		if _, err := tx.ExecContext(ctx, h.resetTimeout); err != nil {
			return fmt.Errorf("sql: lift the statement timeout: %w", err)
		}
	}
	return nil
}

// sqlParam is the value of a named parameter for m: spool's own names
// first, then the message's top-level field of that name (a string
// decoded, null as NULL, anything else its JSON text), else NULL.
func sqlParam(name string, m *spool.Message, file string) (any, error) {
	switch name {
	case "msg_id":
		return m.MsgID, nil
	case "order_no":
		return nullText(m.OrderNo), nil
	case "seq":
		if m.Seq == 0 {
			return nil, nil
		}
		return m.Seq, nil
	case "amount":
		return nullText(string(m.Amount)), nil
	case "file":
		return nullText(file), nil
	case "payload":
		return string(m.Raw), nil
	}
	f, ok := m.Field(name)
	if !ok {
		return nil, nil
	}
	switch f.Kind {
	case spool.KindNull:
		return nil, nil
	case spool.KindString:
		var s string
		if err := json.Unmarshal(f.Raw, &s); err != nil {
			return nil, fmt.Errorf("decode string: %w", err)
		}
		return s, nil
	}
	return string(f.Raw), nil
}

func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}
