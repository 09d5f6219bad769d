package ledgertest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testConflictResult: a duplicate whose content differs from the processed
// row's comes back with Result.Conflict set, by Record with and
// without a handler and by Reserve alike; an identical redelivery and a first delivery do not.
// Metrics count conflicts from this flag, so it must agree with the
// deliveries row's conflict column.
func testConflictResult(t *testing.T, db *ledger.DB) {
	ctx := context.Background()
	first := valid("c-1", msg{ID: "m", Amount: "1.00"})
	record(t, db, first)
	noHandler := func(batch []*spool.Delivery) []spool.Result { return record(t, db, batch...) }
	withHandler := func(batch []*spool.Delivery) []spool.Result {
		h := spool.HandlerFunc(func(context.Context, *sql.Tx, *spool.Delivery) error { return nil })
		return recordWork(t, db, spool.Work{Handler: h, Decide: spool.Retry{}.Decide}, batch...)
	}
	reserved := func(batch []*spool.Delivery) []spool.Result {
		res, err := db.Consumer().Reserve(ctx, batch, spool.CallOwner{Session: "s1"})
		if err != nil {
			t.Fatalf("reserve: %v", err)
		}
		return res
	}
	for i, path := range []struct {
		name string
		run  func([]*spool.Delivery) []spool.Result
	}{{"Record", noHandler}, {"RecordHandler", withHandler}, {"Reserve", reserved}} {
		n := string(rune('a' + i))
		same := valid("c-same-"+n, msg{ID: "m", Amount: "1.00"})
		other := valid("c-other-"+n, msg{ID: "m", Amount: "2.00"})
		fresh := valid("c-fresh-"+n, msg{ID: "fresh-" + n})
		res := path.run([]*spool.Delivery{same, other, fresh})
		want := []struct {
			outcome  spool.Outcome
			conflict bool
		}{{spool.OutcomeDuplicate, false}, {spool.OutcomeDuplicate, true}, {spool.OutcomeProcessed, false}}
		if path.name == "Reserve" {
			want[2].outcome = spool.OutcomeReserved
		}
		for k, r := range res {
			if r.Outcome != want[k].outcome || r.Conflict != want[k].conflict {
				t.Errorf("%s: delivery %d: outcome %s, conflict %v; want %s, %v",
					path.name, k, r.Outcome, r.Conflict, want[k].outcome, want[k].conflict)
			}
		}
	}
	if n := count(t, db, "SELECT COUNT(*) FROM deliveries WHERE conflict = 1"); n != 3 {
		t.Errorf("deliveries rows flagged conflict = %d, want 3 (one per path)", n)
	}
}
