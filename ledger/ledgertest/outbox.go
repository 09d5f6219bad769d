package ledgertest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testOutboxEmit: a handler's events (spool.Emit) commit with its message
// and roll back with it; the rows carry what was emitted, the cause's
// msg_id and a creation time, in id order.
func testOutboxEmit(t *testing.T, db *ledger.DB) {
	h := spool.HandlerFunc(func(ctx context.Context, tx *sql.Tx, d *spool.Delivery) error {
		e := spool.Event{Aggregate: "order-" + d.Message.MsgID[:1], Type: "paid", Payload: []byte(`{"id":"` + d.Message.MsgID + `"}`)}
		if d.Message.MsgID == "a2" {
			e.Headers = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
		}
		if err := spool.Emit(ctx, tx, d, e); err != nil {
			return err
		}
		if d.Message.MsgID == "bad" {
			return spool.Permanent(errors.New("refused after emitting"))
		}
		return nil
	})
	w := spool.Work{Handler: h, Decide: (&decider{verdict: deadLetter(spool.ReasonHandler)}).decide}
	before := time.Now().Add(-time.Second)
	recordWork(t, db, w, valid("c1", msg{ID: "a1"}), valid("c2", msg{ID: "bad"}), valid("c3", msg{ID: "a2"}), valid("c4", msg{ID: "a1"}))
	if err := spool.Emit(t.Context(), nil, nil, spool.Event{Aggregate: "x", Type: "y"}); !errors.Is(err, spool.ErrNoEmitter) {
		t.Errorf("Emit outside a handler: %v, want ErrNoEmitter", err)
	}
	rows, err := db.Outbox().RowsAfter(t.Context(), "order-a", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].MsgID != "a1" || rows[1].MsgID != "a2" || rows[0].ID >= rows[1].ID {
		t.Fatalf("outbox rows of order-a = %+v, want a1's then a2's (the duplicate emits nothing)", rows)
	}
	if string(rows[1].Payload) != `{"id":"a2"}` || rows[1].Type != "paid" || rows[1].Headers["traceparent"] == "" || rows[0].Headers != nil {
		t.Errorf("a2's row = %+v", rows[1])
	}
	if c := rows[0].CreatedAt; c.Before(before) || c.After(time.Now().Add(time.Second)) {
		t.Errorf("created_at %v is not the insert's time", c)
	}
	if bad, _ := db.Outbox().RowsAfter(t.Context(), "order-b", 0, 10); len(bad) != 0 {
		t.Errorf("the failed message's event stayed: %+v", bad)
	}
	// An INSERT naming only the three columns of the README, as a --sql
	// handler writes it, is a complete row.
	if _, err := db.SQL().ExecContext(t.Context(), db.Dialect().Rebind(`INSERT INTO outbox (aggregate, type, payload) VALUES (?, 'payment', ?)`), "order-c", `{}`); err != nil {
		t.Fatal(err)
	}
	if r, err := db.Outbox().RowsAfter(t.Context(), "order-c", 0, 10); err != nil || len(r) != 1 || r[0].CreatedAt.IsZero() {
		t.Errorf("a three-column insert: %+v, %v", r, err)
	}
}

// testOutboxRelay: heads, leases, publishing and parking as the relay
// uses them.
func testOutboxRelay(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	for _, agg := range []string{"A", "B", "A", "C", "A"} {
		if _, err := db.SQL().ExecContext(ctx, db.Dialect().Rebind(`INSERT INTO outbox (aggregate, type, payload) VALUES (?, 't', '{}')`), agg); err != nil {
			t.Fatal(err)
		}
	}
	heads, err := db.Outbox().Heads(ctx, false, 10)
	if err != nil {
		t.Fatal(err)
	}
	var aggs []string
	for _, h := range heads {
		aggs = append(aggs, h.Aggregate)
	}
	if !reflect.DeepEqual(aggs, []string{"A", "B", "C"}) {
		t.Fatalf("heads = %q, want A, B, C", aggs)
	}
	now := time.Now()
	if ok, err := takeLease(ctx, db, "r1", "A", now, now.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("r1 takes A: %v %v", ok, err)
	}
	if ok, err := takeLease(ctx, db, "r2", "A", now, now.Add(time.Minute)); err != nil || ok {
		t.Fatalf("r2 takes A while r1 holds it: %v %v", ok, err)
	}
	rows, err := db.Outbox().RowsAfter(ctx, "A", 0, 2)
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows of A: %+v %v", rows, err)
	}
	if held, err := markPublished(ctx, db, "r1", "A", []int64{rows[0].ID, rows[1].ID}, "dir:///x", now, now.Add(time.Minute)); err != nil || !held {
		t.Fatalf("mark: %v %v", held, err)
	}
	// r1's lease runs out; r2 takes A over and r1 learns it when it marks.
	later := now.Add(2 * time.Minute)
	if ok, err := takeLease(ctx, db, "r2", "A", later, later.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("r2 takes A after r1's lease ran out: %v %v", ok, err)
	}
	rest, err := db.Outbox().RowsAfter(ctx, "A", 0, 10)
	if err != nil || len(rest) != 1 {
		t.Fatalf("rows of A after two were published: %+v %v", rest, err)
	}
	if held, err := markPublished(ctx, db, "r1", "A", []int64{rest[0].ID}, "dir:///x", later, later.Add(time.Minute)); err != nil || held {
		t.Fatalf("r1 marks without its lease: held %v, %v", held, err)
	}
	// B fails once, then for good: parked, it blocks B (and only B) unless
	// parked rows are skipped.
	b, _ := db.Outbox().RowsAfter(ctx, "B", 0, 1)
	if err := db.Outbox().FailPublish(ctx, b[0].ID, "refused", later.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := db.Outbox().Park(ctx, b[0].ID, "400 Bad Request", later); err != nil {
		t.Fatal(err)
	}
	heads, _ = db.Outbox().Heads(ctx, false, 10)
	if len(heads) != 2 || heads[0].Aggregate != "B" || !heads[0].Parked || heads[1].Aggregate != "C" {
		t.Errorf("heads with B parked (blocking) = %+v", heads)
	}
	heads, _ = db.Outbox().Heads(ctx, true, 10)
	if len(heads) != 1 || heads[0].Aggregate != "C" {
		t.Errorf("heads with B parked (skipped) = %+v", heads)
	}
	st, err := db.Outbox().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pending != 1 || st.Parked != 1 || st.Published != 3 || st.Oldest.IsZero() {
		t.Errorf("stats = %+v, want 1 pending (C), 1 parked, 3 published", st)
	}
	parked, err := db.Outbox().ParkedRows(ctx, 10)
	if err != nil || len(parked) != 1 || parked[0].Reason != "400 Bad Request" || parked[0].Attempts != 2 {
		t.Errorf("parked rows = %+v, %v", parked, err)
	}
	if n, err := db.Outbox().Unpark(ctx, "B"); err != nil || n != 1 {
		t.Errorf("unpark B: %d %v", n, err)
	}
	if _, err := db.Outbox().CommitPublished(ctx, "r2", ledger.OutboxCommit{Release: []string{"A"}}); err != nil {
		t.Fatal(err)
	}
	if ok, err := takeLease(ctx, db, "r3", "A", now, now.Add(time.Minute)); err != nil || !ok {
		t.Errorf("r3 takes A after r2 released it: %v %v", ok, err)
	}
	// Prune removes the rows published before the window's edge (the two
	// marked at now, not the one marked at later), never an unpublished
	// one; a dry run counts the same rows and removes nothing.
	edge := now.Add(time.Minute)
	if n, err := db.Fsck().Prune(ctx, ledger.Prune{Before: edge, DryRun: true}); err != nil || n.Outbox != 2 {
		t.Errorf("dry-run prune: %+v, %v; want 2 outbox rows", n, err)
	}
	if n, err := db.Fsck().Prune(ctx, ledger.Prune{Before: edge}); err != nil || n.Outbox != 2 || n.Total() != 2 {
		t.Errorf("prune: %+v, %v; want 2 outbox rows", n, err)
	}
	if got := column(t, db, "SELECT aggregate FROM outbox ORDER BY id"); !reflect.DeepEqual(got, []string{"B", "C", "A"}) {
		t.Errorf("outbox after prune = %q, want B and C (unpublished) and A's row published after the edge", got)
	}
	// The order locks of aggregates with rows still to publish stay (none
	// on SQLite, which needs none); A's went with its last pending row.
	if got := column(t, db, "SELECT aggregate FROM outbox_order ORDER BY aggregate"); len(got) != 0 && !reflect.DeepEqual(got, []string{"B", "C"}) {
		t.Errorf("outbox_order after prune = %q, want B and C", got)
	}
}

// testEmitLimits: an event whose aggregate is longer than spool.MaxKeyLen,
// whose type is longer than 255 bytes (AMQP's short string), whose
// aggregate or type holds a control character, or whose headers are
// longer than every engine's column holds, fails its handler's message
// with a permanent error naming the limit: a dead letter at its first
// attempt under the default policy, the rest of the batch processed. An
// aggregate at the limit, random so that PostgreSQL cannot compress its
// index entries, is kept exactly: it keys the outbox's indexes.
func testEmitLimits(t *testing.T, db *ledger.DB) {
	atLimit := randomKey(spool.MaxKeyLen)
	events := map[string]spool.Event{
		"fits":           {Aggregate: atLimit, Type: randomKey(255)},
		"long-aggregate": {Aggregate: randomKey(3000), Type: "paid"},
		"long-type":      {Aggregate: "a", Type: randomKey(256)},
		"control":        {Aggregate: "a\nb", Type: "paid"},
		"huge-headers":   {Aggregate: "a", Type: "paid", Headers: map[string]string{"h": randomKey(70000)}},
	}
	want := map[string]string{
		"long-aggregate": "aggregate of 3000 bytes, over the limit of 1024",
		"long-type":      "type of 256 bytes, over the limit of 255",
		"control":        "holds a control character",
		"huge-headers":   "over the limit of 65535",
	}
	h := spool.HandlerFunc(func(ctx context.Context, tx *sql.Tx, d *spool.Delivery) error {
		return spool.Emit(ctx, tx, d, events[d.Message.MsgID])
	})
	w := spool.Work{Handler: h, Decide: spool.Retry{NoJitter: true}.Decide}
	ids := []string{"control", "fits", "huge-headers", "long-aggregate", "long-type"}
	var batch []*spool.Delivery
	for _, id := range ids {
		batch = append(batch, valid("c-"+id, msg{ID: id}))
	}
	for i, r := range recordWork(t, db, w, batch...) {
		id := ids[i]
		if id == "fits" {
			if r.Outcome != spool.OutcomeProcessed {
				t.Errorf("%s: %s (%v), want processed", id, r.Outcome, r.Err)
			}
			continue
		}
		if r.Outcome != spool.OutcomeDeadLetter || r.Attempts != 1 || r.Reject == nil ||
			r.Reject.Reason != spool.ReasonHandler || !strings.Contains(r.Reject.Detail, want[id]) {
			t.Errorf("%s: %+v, want a dead letter (handler) at the first attempt with %q", id, r, want[id])
		}
	}
	rows, err := db.Outbox().RowsAfter(t.Context(), atLimit, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Aggregate != atLimit || rows[0].MsgID != "fits" {
		t.Errorf("outbox rows of the aggregate at the limit: %+v, want fits's", rows)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM outbox"); n != 1 {
		t.Errorf("outbox holds %d rows, want the one that fits", n)
	}
}

// takeLease is AcquireLeases for the one aggregate agg: whether owner
// holds its lease now.
func takeLease(ctx context.Context, db *ledger.DB, owner, agg string, now, expires time.Time) (bool, error) {
	held, err := db.Outbox().AcquireLeases(ctx, owner, []string{agg}, now, expires)
	return len(held) == 1, err
}

// markPublished is CommitPublished of the rows ids of agg, renewing
// owner's lease on it: whether owner still held the lease.
func markPublished(ctx context.Context, db *ledger.DB, owner, agg string, ids []int64, target string, at, expires time.Time) (bool, error) {
	lost, err := db.Outbox().CommitPublished(ctx, owner, ledger.OutboxCommit{Published: ids, Target: target, At: at, Renew: []string{agg}, Expires: expires})
	return len(lost) == 0, err
}

// testOutboxRowsEach: RowsAfterEach answers each read as RowsAfter
// does, with its own bound and limit, in one query over interleaved
// aggregates, a parked row and a published one among them.
func testOutboxRowsEach(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	for i := range 30 {
		agg := []string{"ea", "eb", "ec"}[i%3]
		if _, err := db.SQL().ExecContext(ctx, db.Dialect().Rebind(`INSERT INTO outbox (aggregate, type, payload) VALUES (?, 't', ?)`), agg, fmt.Sprintf(`{"i":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	first, err := db.Outbox().RowsAfter(ctx, "eb", 0, 10)
	if err != nil || len(first) != 10 {
		t.Fatalf("rows of eb: %d, %v", len(first), err)
	}
	if err := db.Outbox().Park(ctx, first[3].ID, "bad", time.Now()); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if ok, err := takeLease(ctx, db, "r1", "ec", now, now.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("lease ec: %v %v", ok, err)
	}
	ec, err := db.Outbox().RowsAfter(ctx, "ec", 0, 1)
	if err != nil || len(ec) != 1 {
		t.Fatalf("rows of ec: %v", err)
	}
	if held, err := markPublished(ctx, db, "r1", "ec", []int64{ec[0].ID}, "dir:///x", now, now.Add(time.Minute)); err != nil || !held {
		t.Fatalf("mark: %v %v", held, err)
	}
	reads := []ledger.OutboxRead{{Aggregate: "eb", After: first[1].ID}, {Aggregate: "ea"}, {Aggregate: "none"}, {Aggregate: "ec"}, {Aggregate: "ea", After: first[5].ID}}
	for _, limit := range []int{1, 4, 100} {
		got, err := db.Outbox().RowsAfterEach(ctx, reads, limit)
		if err != nil || len(got) != len(reads) {
			t.Fatalf("limit %d: %d answers, %v", limit, len(got), err)
		}
		for i, r := range reads {
			want, err := db.Outbox().RowsAfter(ctx, r.Aggregate, r.After, limit)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got[i], want) {
				t.Errorf("limit %d, read %d (%s after %d): %+v, want %+v", limit, i, r.Aggregate, r.After, got[i], want)
			}
		}
		if len(got[0]) != min(limit, 8) || len(got[2]) != 0 || len(got[3]) != min(limit, 9) || limit > 1 && !got[0][1].Parked {
			t.Errorf("limit %d: %d, %d, %d rows", limit, len(got[0]), len(got[2]), len(got[3]))
		}
	}
	if _, err := db.Outbox().RowsAfterEach(ctx, nil, 10); err == nil {
		t.Error("no reads: no error")
	}
}
