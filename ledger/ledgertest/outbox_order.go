package ledgertest

import (
	"context"
	"database/sql"
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
