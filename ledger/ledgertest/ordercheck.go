package ledgertest

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// seqMsg is one processed message of an order-check case: msg_id, order_no
// and seq; the msg_id doubles as the claim's suffix.
type seqMsg struct {
	id, order string
	seq       int64
}

// orderCases are the order-check cases; each runs on a fresh ledger.
var orderCases = []struct {
	name string
	msgs []seqMsg
	want []ledger.OrderProblem
}{
	{
		name: "complete",
		msgs: []seqMsg{{"a1", "A", 1}, {"a3", "A", 3}, {"a2", "A", 2}, {"b1", "B", 1}},
	},
	{
		name: "empty",
	},
	{
		name: "duplicate seq",
		msgs: []seqMsg{{"a1", "A", 1}, {"a2", "A", 2}, {"a2-bis", "A", 2}, {"a3", "A", 3}},
		want: []ledger.OrderProblem{{OrderNo: "A", Seq: "2", Problem: ledger.ProblemDuplicate}},
	},
	{
		name: "three msg_ids share a seq: one row",
		msgs: []seqMsg{{"a1", "A", 1}, {"x", "A", 1}, {"y", "A", 1}},
		want: []ledger.OrderProblem{{OrderNo: "A", Seq: "1", Problem: ledger.ProblemDuplicate}},
	},
	{
		name: "missing single",
		msgs: []seqMsg{{"a1", "A", 1}, {"a2", "A", 2}, {"a4", "A", 4}},
		want: []ledger.OrderProblem{{OrderNo: "A", Seq: "3", Problem: ledger.ProblemMissing}},
	},
	{
		name: "missing run",
		msgs: []seqMsg{{"a1", "A", 1}, {"a5", "A", 5}},
		want: []ledger.OrderProblem{{OrderNo: "A", Seq: "2-4", Problem: ledger.ProblemMissing}},
	},
	{
		name: "missing at start",
		msgs: []seqMsg{{"a3", "A", 3}, {"a4", "A", 4}},
		want: []ledger.OrderProblem{{OrderNo: "A", Seq: "1-2", Problem: ledger.ProblemMissing}},
	},
	{
		name: "missing only the first",
		msgs: []seqMsg{{"a2", "A", 2}},
		want: []ledger.OrderProblem{{OrderNo: "A", Seq: "1", Problem: ledger.ProblemMissing}},
	},
	{
		// Byte order of order_no ("B" < "X" < "a" < "b"), and numeric, not
		// textual, order of seq within one ("2" < "10-11" < "12").
		name: "several orders sorted",
		msgs: []seqMsg{
			{"b3", "b", 3}, {"x12", "X", 12}, {"a1", "a", 1}, {"x1", "X", 1},
			{"B2", "B", 2}, {"x3", "X", 3}, {"x4", "X", 4}, {"x9", "X", 9},
			{"a1-bis", "a", 1}, {"x12-bis", "X", 12}, {"b1", "b", 1},
			{"x5", "X", 5}, {"x6", "X", 6}, {"x7", "X", 7}, {"x8", "X", 8},
		},
		want: []ledger.OrderProblem{
			{OrderNo: "B", Seq: "1", Problem: ledger.ProblemMissing},
			{OrderNo: "X", Seq: "2", Problem: ledger.ProblemMissing},
			{OrderNo: "X", Seq: "10-11", Problem: ledger.ProblemMissing},
			{OrderNo: "X", Seq: "12", Problem: ledger.ProblemDuplicate},
			{OrderNo: "a", Seq: "1", Problem: ledger.ProblemDuplicate},
			{OrderNo: "b", Seq: "2", Problem: ledger.ProblemMissing},
		},
	},
	{
		name: "rows without order_no or seq ignored",
		msgs: []seqMsg{{"a1", "A", 1}, {"n1", "", 5}, {"n2", "N", 0}, {"n3", "", 0}},
	},
	{
		name: "large seqs",
		msgs: []seqMsg{{"a1", "A", 1}, {"a2", "A", 9_000_000_000}},
		want: []ledger.OrderProblem{{OrderNo: "A", Seq: "2-8999999999", Problem: ledger.ProblemMissing}},
	},
}

func testOrderCheck(t *testing.T, fresh func(t *testing.T) *ledger.DB) {
	for _, tc := range orderCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := fresh(t)
			recordOrders(t, db, tc.msgs)
			got, err := db.Messages().OrderCheck(t.Context())
			if err != nil {
				t.Fatalf("Messages().OrderCheck: %v", err)
			}
			if len(got) == 0 && len(tc.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Messages().OrderCheck =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

// recordOrders records msgs in two batches, plus a redelivery of the first
// one: a duplicate delivery of one msg_id is not a duplicate seq.
func recordOrders(t *testing.T, db *ledger.DB, msgs []seqMsg) {
	t.Helper()
	var batch []*spool.Delivery
	for _, m := range msgs {
		batch = append(batch, valid("claim-"+m.id, msg{ID: m.id, OrderNo: m.order, Seq: m.seq, Amount: "1"}))
	}
	if len(msgs) > 0 {
		m := msgs[0]
		batch = append(batch, valid("again-"+m.id, msg{ID: m.id, OrderNo: m.order, Seq: m.seq, Amount: "1"}))
	}
	half := len(batch) / 2
	record(t, db, batch[:half]...)
	record(t, db, batch[half:]...)
}

// testOrderCheckSQLAgrees runs OrderCheckSQL as an operator would and checks
// it returns Messages.OrderCheck's rows, in the same order within each order_no (the
// order of order_no itself follows the engine's collation).
func testOrderCheckSQLAgrees(t *testing.T, db *ledger.DB) {
	for _, tc := range orderCases {
		if tc.name == "several orders sorted" {
			recordOrders(t, db, tc.msgs)
		}
	}
	want, err := db.Messages().OrderCheck(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got, err := RunOrderCheckSQL(t, db)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("OrderCheckSQL rows =\n%+v\nwant\n%+v", got, want)
	}
	byOrder := func(ps []ledger.OrderProblem) map[string][]ledger.OrderProblem {
		m := map[string][]ledger.OrderProblem{}
		for _, p := range ps {
			m[p.OrderNo] = append(m[p.OrderNo], p)
		}
		return m
	}
	if g, w := byOrder(got), byOrder(want); !reflect.DeepEqual(g, w) {
		t.Errorf("OrderCheckSQL rows per order =\n%+v\nwant\n%+v", g, w)
	}
}

// RunOrderCheckSQL runs ledger.OrderCheckSQL through db's plain SQL handle, in
// the order the query returns its rows, as `sqlite3 < ordercheck.sql` or
// `psql -f` would; a backend's own tests use it to check the query's ORDER BY
// under the engine's collation.
func RunOrderCheckSQL(t *testing.T, db *ledger.DB) ([]ledger.OrderProblem, error) {
	t.Helper()
	rows, err := db.SQL().QueryContext(t.Context(), ledger.OrderCheckSQL)
	if err != nil {
		return nil, fmt.Errorf("order check sql: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if want := []string{"order_no", "seq", "problem"}; !reflect.DeepEqual(cols, want) {
		return nil, fmt.Errorf("order check sql: columns %q, want %q", cols, want)
	}
	var ps []ledger.OrderProblem
	for rows.Next() {
		var p ledger.OrderProblem
		if err := rows.Scan(&p.OrderNo, &p.Seq, &p.Problem); err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, rows.Err()
}
