package ledgertest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
)

// testOutboxBatch: the calls of a relay that keeps many events in flight:
// the leases of several aggregates taken in one transaction, rows read on
// after the last one sent, and the marks, renewals and releases of a
// stretch committed together, a lease lost meanwhile reported.
func testOutboxBatch(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	for _, agg := range []string{"A", "B", "A", "C", "A"} {
		if _, err := db.SQL().ExecContext(ctx, db.Dialect().Rebind(`INSERT INTO outbox (aggregate, type, payload) VALUES (?, 't', '{}')`), agg); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	held, err := db.Outbox().AcquireLeases(ctx, "r1", []string{"A", "B"}, now, now.Add(time.Minute))
	if err != nil || !reflect.DeepEqual(held, []string{"A", "B"}) {
		t.Fatalf("r1 takes A and B: %q, %v", held, err)
	}
	if held, err := db.Outbox().AcquireLeases(ctx, "r2", []string{"B", "C"}, now, now.Add(time.Minute)); err != nil || !reflect.DeepEqual(held, []string{"C"}) {
		t.Fatalf("r2 asks for B and C while r1 holds B: %q, %v; want C", held, err)
	}
	a, err := db.Outbox().RowsAfter(ctx, "A", 0, 1)
	if err != nil || len(a) != 1 {
		t.Fatalf("A's first row: %+v, %v", a, err)
	}
	rest, err := db.Outbox().RowsAfter(ctx, "A", a[0].ID, 10)
	if err != nil || len(rest) != 2 || rest[0].ID <= a[0].ID {
		t.Fatalf("A's rows after its first: %+v, %v; want the other two", rest, err)
	}
	b, _ := db.Outbox().RowsAfter(ctx, "B", 0, 1)
	lost, err := db.Outbox().CommitPublished(ctx, "r1", ledger.OutboxCommit{
		Published: []int64{a[0].ID, b[0].ID}, Target: "kafka://k/t", At: now,
		Renew: []string{"A"}, Expires: now.Add(time.Minute), Release: []string{"B"},
	})
	if err != nil || len(lost) != 0 {
		t.Fatalf("commit: lost %q, %v", lost, err)
	}
	if got, _ := db.Outbox().RowsAfter(ctx, "A", 0, 10); len(got) != 2 {
		t.Errorf("A after its first row was marked: %d rows, want 2", len(got))
	}
	if got, _ := db.Outbox().RowsAfter(ctx, "B", 0, 10); len(got) != 0 {
		t.Errorf("B after its row was marked: %d rows, want none", len(got))
	}
	// B was released: r2 takes it at once. A's lease runs out: r2 takes it,
	// and r1 learns at its next commit, whose marks count all the same.
	later := now.Add(2 * time.Minute)
	if held, err := db.Outbox().AcquireLeases(ctx, "r2", []string{"A", "B"}, later, later.Add(time.Minute)); err != nil || !reflect.DeepEqual(held, []string{"A", "B"}) {
		t.Fatalf("r2 takes A (run out) and B (released): %q, %v", held, err)
	}
	lost, err = db.Outbox().CommitPublished(ctx, "r1", ledger.OutboxCommit{
		Published: []int64{rest[0].ID}, Target: "kafka://k/t", At: later, Renew: []string{"A"}, Expires: later.Add(time.Minute),
	})
	if err != nil || !reflect.DeepEqual(lost, []string{"A"}) {
		t.Fatalf("r1 commits after losing A: lost %q, %v; want A", lost, err)
	}
	if got, _ := db.Outbox().RowsAfter(ctx, "A", 0, 10); len(got) != 1 {
		t.Errorf("A after r1's late mark: %d rows, want 1", len(got))
	}
}

// testOutboxMarkRuns: CommitPublished marks exactly the rows it is given,
// whether they come as a long run of consecutive ids, scattered, out of
// order or twice; a row published before keeps its mark and target.
func testOutboxMarkRuns(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	for i := range 100 {
		if _, err := db.SQL().ExecContext(ctx, db.Dialect().Rebind(`INSERT INTO outbox (aggregate, type, payload) VALUES (?, 't', '{}')`), fmt.Sprintf("run%d", i%2)); err != nil {
			t.Fatal(err)
		}
	}
	ids := runIDs(t, db)
	if len(ids) != 100 {
		t.Fatalf("%d rows, want 100", len(ids))
	}
	now := time.Now()
	if _, err := db.Outbox().CommitPublished(ctx, "r1", ledger.OutboxCommit{Published: []int64{ids[50]}, Target: "first", At: now}); err != nil {
		t.Fatal(err)
	}
	// ids[10..59] (a run, ids[50] among them already marked), ids[70],
	// ids[72], ids[90], and ids[20] again; out of order.
	mark := []int64{ids[90], ids[72]}
	for i := 59; i >= 10; i-- {
		mark = append(mark, ids[i])
	}
	mark = append(mark, ids[70], ids[20])
	if _, err := db.Outbox().CommitPublished(ctx, "r1", ledger.OutboxCommit{Published: mark, Target: "second", At: now.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{}
	for _, id := range mark {
		want[id] = "second"
	}
	want[ids[50]] = "first"
	rows, err := db.SQL().QueryContext(ctx, `SELECT id, COALESCE(target, '') FROM outbox WHERE published_at IS NOT NULL AND aggregate IN ('run0', 'run1')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[int64]string{}
	for rows.Next() {
		var id int64
		var target string
		if err := rows.Scan(&id, &target); err != nil {
			t.Fatal(err)
		}
		got[id] = target
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("published rows and targets: %v, want %v", got, want)
	}
}

// runIDs are the ids of testOutboxMarkRuns' rows, in order.
func runIDs(t *testing.T, db *ledger.DB) []int64 {
	t.Helper()
	rows, err := db.SQL().QueryContext(t.Context(), `SELECT id FROM outbox WHERE aggregate IN ('run0', 'run1') ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}
