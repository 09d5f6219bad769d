package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// rowsPerInsert is how many rows one INSERT carries: 128 rows of 16 columns
// stay far below the bind-parameter limits of SQLite (32766) and
// PostgreSQL (65535), while a 256-message batch needs only two statements a
// table.
const rowsPerInsert = 128

const (
	processedColumns = 10
	deliveryColumns  = 16
)

// multiRow is a multi-row INSERT whose full-size form (rowsPerInsert rows)
// is prepared once, when the ledger opens: parsing a statement of hundreds
// of placeholders costs as much as running it. It must be prepared before
// any transaction runs: preparing on the pool while a transaction holds one
// connection and another waits for SQLite's write lock would deadlock the
// pool. Shorter forms (a batch's last chunk) are parsed when used.
type multiRow struct {
	head, tail string
	cols       int
	full       *sql.Stmt
	dialect    Dialect
}

func newMultiRow(ctx context.Context, db *sql.DB, d Dialect, head string, cols int, tail string) (*multiRow, error) {
	m := &multiRow{head: head, tail: tail, cols: cols, dialect: d}
	st, err := db.PrepareContext(ctx, m.text(rowsPerInsert))
	if err != nil {
		return nil, err
	}
	m.full = st
	return m, nil
}

// text is the statement for n rows, rebound for the dialect.
func (m *multiRow) text(n int) string {
	tuple := "(" + strings.TrimSuffix(strings.Repeat("?, ", m.cols), ", ") + ")"
	var b strings.Builder
	b.WriteString(m.head)
	b.WriteString("\nVALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(tuple)
	}
	b.WriteString(m.tail)
	return m.dialect.Rebind(b.String())
}

// query runs the statement for len(args)/cols rows in tx.
func (m *multiRow) query(ctx context.Context, tx *sql.Tx, args []any) (*sql.Rows, error) {
	if n := len(args) / m.cols; n != rowsPerInsert {
		return tx.QueryContext(ctx, m.text(n), args...)
	}
	return tx.StmtContext(ctx, m.full).QueryContext(ctx, args...)
}

// exec is query for a statement without results.
func (m *multiRow) exec(ctx context.Context, tx *sql.Tx, args []any) error {
	var err error
	if n := len(args) / m.cols; n != rowsPerInsert {
		_, err = tx.ExecContext(ctx, m.text(n), args...)
	} else {
		_, err = tx.StmtContext(ctx, m.full).ExecContext(ctx, args...)
	}
	return err
}

func (m *multiRow) close() error {
	if m == nil || m.full == nil {
		return nil
	}
	return m.full.Close()
}

// prepareInserts prepares the multi-row INSERTs of Record. I2: the PRIMARY
// KEY, not application code, decides which rows go into processed;
// RETURNING lists the msg_ids it let in, on both engines.
func (db *DB) prepareInserts(ctx context.Context) error {
	var err error
	db.insProcessed, err = newMultiRow(ctx, db.sql, db.dialect, `INSERT INTO processed
    (msg_id, order_no, seq, amount, processed_at, file, content_hash, payload, claim, ino)`,
		processedColumns, "\nON CONFLICT (msg_id) DO NOTHING\nRETURNING msg_id")
	if err != nil {
		return fmt.Errorf("prepare insert processed: %w", err)
	}
	db.insDeliveries, err = newMultiRow(ctx, db.sql, db.dialect, `INSERT INTO deliveries
    (claim, file, ino, consumer, msg_id, outcome, reason, field, detail, content_hash, size, at,
     attempts, first_failure, last_failure, conflict)`,
		deliveryColumns, "")
	if err != nil {
		return fmt.Errorf("prepare insert deliveries: %w", err)
	}
	return nil
}
