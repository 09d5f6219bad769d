package ledger

import (
	"context"
	_ "embed"
	"slices"
	"strings"
)

// OrderCheckSQL is the portable order-check query, for `spool order-check
// --sql` and for operators: it runs unchanged in `sqlite3 ledger.db` and
// `psql`, and returns the columns order_no, seq, problem described on
// OrderProblem, already sorted.
//
//go:embed ordercheck.sql
var OrderCheckSQL string

// The problems Messages.OrderCheck reports.
const (
	// ProblemDuplicate: two or more distinct msg_ids share an order_no and seq.
	ProblemDuplicate = "duplicate"
	// ProblemMissing: a seq, or a run of them, is absent; sequences start at 1.
	ProblemMissing = "missing"
)

// OrderProblem is one row of the order check.
type OrderProblem struct {
	OrderNo string
	// Seq is the duplicated seq ("7"), a single missing seq ("3") or a run
	// of missing seqs as "from-to" ("2-4").
	Seq string
	// Problem is ProblemDuplicate or ProblemMissing.
	Problem string
}

// OrderCheck runs OrderCheckSQL and returns the problems it finds, none when
// every order is complete from seq 1 up to its highest seq. They are sorted by
// order_no in byte order, whatever the engine's collation, then by the numeric
// start of Seq, then by problem.
func (ms Messages) OrderCheck(ctx context.Context) ([]OrderProblem, error) {
	if err := ms.db.open(); err != nil {
		return nil, err
	}
	rows, err := ms.db.sql.QueryContext(ctx, OrderCheckSQL)
	if err != nil {
		return nil, ms.db.fail("order check", err)
	}
	defer rows.Close()
	var ps []OrderProblem
	for rows.Next() {
		var p OrderProblem
		if err := rows.Scan(&p.OrderNo, &p.Seq, &p.Problem); err != nil {
			return nil, ms.db.fail("order check", err)
		}
		ps = append(ps, p)
	}
	if err := rows.Err(); err != nil {
		return nil, ms.db.fail("order check", err)
	}
	// The query sorts order_no by the database's collation, which on
	// PostgreSQL may not be byte order. A stable sort on order_no alone
	// fixes that and keeps the query's order within each order_no.
	slices.SortStableFunc(ps, func(a, b OrderProblem) int { return strings.Compare(a.OrderNo, b.OrderNo) })
	return ps, nil
}
