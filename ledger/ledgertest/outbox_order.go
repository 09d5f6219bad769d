package ledgertest

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
)

// testOutboxCommitOrder: ids are taken at insert, transactions commit in
// their own order. Two transactions emit an event of one aggregate; the
// first (the lower id) is still open when the second commits. A relay
// reading the aggregate's pending rows then must not find the second's
// row alone: it would publish it before the first's, which commits later
// with the lower id, and break the aggregate's order at the receiver.
// The second insert waits for the first's commit instead (migration 013),
// so the aggregate's rows commit in id order. SQLite has one writer at a
// time: there the second transaction cannot write before the first ends.
func testOutboxCommitOrder(t *testing.T, db *ledger.DB) {
	if db.Dialect().SingleWriter() {
		t.Skip("one writer at a time: transactions commit in the order of their ids")
	}
	ctx := t.Context()
	insert := db.Dialect().Rebind(`INSERT INTO outbox (aggregate, type, payload) VALUES (?, ?, '{}')`)
	begin := func() *sql.Tx {
		tx, err := db.SQL().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback() }) // a no-op once committed
		return tx
	}
	first := begin()
	if _, err := first.ExecContext(ctx, insert, "A", "first"); err != nil {
		t.Fatal(err)
	}
	// Another aggregate's event is not held up by the open transaction.
	other := begin()
	if _, err := other.ExecContext(ctx, insert, "B", "other"); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() {
		tx, err := db.SQL().BeginTx(context.WithoutCancel(ctx), nil)
		if err == nil {
			if _, err = tx.ExecContext(ctx, insert, "A", "second"); err == nil {
				err = tx.Commit()
			} else {
				_ = tx.Rollback()
			}
		}
		second <- err
	}()
	// What a relay reads while the first is open, after the second had
	// every chance to commit.
	committed := false
	select {
	case err := <-second:
		if err != nil {
			t.Fatal(err)
		}
		committed = true
	case <-time.After(500 * time.Millisecond):
	}
	rows, err := db.Outbox().RowsAfter(ctx, "A", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 0 {
		t.Errorf("with the first transaction open, the relay reads A's rows %+v: it would publish them before the first's", rows)
	}
	if b, err := db.Outbox().RowsAfter(ctx, "B", 0, 10); err != nil || len(b) != 1 {
		t.Errorf("B's row, committed beside the open transaction: %+v, %v", b, err)
	}
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	if !committed {
		select {
		case err := <-second:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the second transaction did not commit after the first")
		}
	}
	rows, err = db.Outbox().RowsAfter(ctx, "A", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Type != "first" || rows[1].Type != "second" || rows[0].ID >= rows[1].ID {
		t.Fatalf("A's rows = %+v, want the first's then the second's, in id order", rows)
	}
}

// testOutboxHeads: Heads walks the aggregates with unpublished rows
// (interleaved, published and parked ones among them) and gives each its
// first unpublished row, the parked ones passed over under skipParked, in
// id order up to limit.
func testOutboxHeads(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	if heads, err := db.Outbox().Heads(ctx, false, 10); err != nil || len(heads) != 0 {
		t.Fatalf("heads of an empty outbox: %+v, %v", heads, err)
	}
	insert := db.Dialect().Rebind(`INSERT INTO outbox (aggregate, type, payload) VALUES (?, 't', '{}')`)
	ids := map[string][]int64{}
	for _, agg := range []string{"d", "b", "d", "a", "b", "c", "d", "a", "e"} {
		if _, err := db.SQL().ExecContext(ctx, insert, agg); err != nil {
			t.Fatal(err)
		}
		rows, err := db.Outbox().RowsAfter(ctx, agg, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		ids[agg] = append(ids[agg], rows[len(rows)-1].ID)
	}
	now := time.Now()
	// b's first row published; d's first parked; e's only row parked.
	if _, err := db.Outbox().CommitPublished(ctx, "r", ledger.OutboxCommit{Published: []int64{ids["b"][0]}, Target: "x", At: now}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{ids["d"][0], ids["e"][0]} {
		if err := db.Outbox().Park(ctx, id, "refused", now); err != nil {
			t.Fatal(err)
		}
	}
	type head struct {
		agg    string
		id     int64
		parked bool
	}
	got := func(skip bool, limit int) []head {
		t.Helper()
		hs, err := db.Outbox().Heads(ctx, skip, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []head
		for _, h := range hs {
			out = append(out, head{h.Aggregate, h.ID, h.Parked})
		}
		return out
	}
	block := []head{{"d", ids["d"][0], true}, {"a", ids["a"][0], false}, {"b", ids["b"][1], false}, {"c", ids["c"][0], false}, {"e", ids["e"][0], true}}
	if h := got(false, 10); !reflect.DeepEqual(h, block) {
		t.Errorf("heads = %+v, want %+v", h, block)
	}
	if h := got(false, 2); !reflect.DeepEqual(h, block[:2]) {
		t.Errorf("heads, limit 2 = %+v, want %+v", h, block[:2])
	}
	skip := []head{{"d", ids["d"][1], false}, {"a", ids["a"][0], false}, {"b", ids["b"][1], false}, {"c", ids["c"][0], false}}
	if h := got(true, 10); !reflect.DeepEqual(h, skip) {
		t.Errorf("heads passing parked rows = %+v, want %+v", h, skip)
	}
	// More aggregates than a walk of the index takes (512): the same
	// heads, from the grouped query.
	const many = 600
	tx, err := db.SQL().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range many {
		if _, err := tx.ExecContext(ctx, insert, fmt.Sprintf("m%04d", many-i)); err != nil {
			_ = tx.Rollback()
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, skipParked := range []bool{false, true} {
		want := block
		if skipParked {
			want = skip
		}
		h := got(skipParked, len(want)+2)
		if len(h) != len(want)+2 || !reflect.DeepEqual(h[:len(want)], want) || h[len(want)].agg != fmt.Sprintf("m%04d", many) ||
			h[len(want)+1].agg != fmt.Sprintf("m%04d", many-1) {
			t.Errorf("heads among %d more aggregates (skipping parked rows: %v) = %+v, want %+v, m%04d, m%04d", many, skipParked, h, want, many, many-1)
		}
		if n := len(got(skipParked, 1000)); n != len(want)+many {
			t.Errorf("%d heads among %d more aggregates (skipping parked rows: %v), want %d", n, many, skipParked, len(want)+many)
		}
	}
}
