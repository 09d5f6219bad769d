package ledgertest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testHeaders: the headers of a message (migration 017) are recorded with
// its processed row on both paths, the batch without business work and
// the handler's, read back by Processed, and come with the outbox rows its
// handler emitted (OutboxRow.Cause); a message without them has none.
func testHeaders(t *testing.T, db *ledger.DB) {
	h := spool.MessageHeaders{Version: "v2", Trace: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Tenant: "acme"}
	plain := valid("h1", msg{ID: "h-plain"})
	plain.Message.Headers = h
	record(t, db, plain, valid("h2", msg{ID: "h-none"}))

	emit := spool.HandlerFunc(func(ctx context.Context, tx *sql.Tx, d *spool.Delivery) error {
		return spool.Emit(ctx, tx, d, spool.Event{Aggregate: "hdr", Type: "t", Payload: []byte(`{}`)})
	})
	work := valid("h3", msg{ID: "h-work"})
	work.Message.Headers = spool.MessageHeaders{Trace: h.Trace, Tenant: "other"}
	recordWork(t, db, spool.Work{Handler: emit, Decide: (&decider{verdict: deadLetter(spool.ReasonHandler)}).decide}, work, valid("h4", msg{ID: "h-work-none"}))

	for id, want := range map[string]spool.MessageHeaders{
		"h-plain": h, "h-none": {}, "h-work": work.Message.Headers, "h-work-none": {},
	} {
		r, ok := processedRow(t, db, id)
		if !ok || r.Headers != want {
			t.Errorf("Processed(%s).Headers = %+v (found %v), want %+v", id, r.Headers, ok, want)
		}
	}
	rows, err := db.Outbox().RowsAfter(t.Context(), "hdr", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Cause != work.Message.Headers || !rows[1].Cause.IsZero() {
		t.Fatalf("outbox rows %+v: want h-work's headers as the first's cause, none on the second", rows)
	}

	// A prune whose window covers every row keeps the processed rows of
	// the messages whose events wait for the relay, so that their cause
	// still comes with them; the others go. Once published, they go too.
	ctx := t.Context()
	edge := time.Now().Add(time.Hour)
	if n, err := db.Fsck().Prune(ctx, ledger.Prune{Before: edge}); err != nil || n.Processed != 2 {
		t.Fatalf("prune with two events pending: %+v, %v; want the 2 processed rows that emitted nothing", n, err)
	}
	if _, ok := processedRow(t, db, "h-plain"); ok {
		t.Error("h-plain's processed row survived a prune past it")
	}
	if rows, err := db.Outbox().RowsAfter(ctx, "hdr", 0, 10); err != nil || len(rows) != 2 || rows[0].Cause != work.Message.Headers {
		t.Fatalf("outbox rows after the prune: %+v, %v; want h-work's headers still their cause", rows, err)
	}
	now := time.Now()
	if ok, err := takeLease(ctx, db, "r", "hdr", now, now.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("lease hdr: %v %v", ok, err)
	}
	if held, err := markPublished(ctx, db, "r", "hdr", []int64{rows[0].ID, rows[1].ID}, "dir:///x", now, now.Add(time.Minute)); err != nil || !held {
		t.Fatalf("mark hdr published: %v %v", held, err)
	}
	if n, err := db.Fsck().Prune(ctx, ledger.Prune{Before: edge}); err != nil || n.Processed != 2 || n.Outbox != 2 {
		t.Errorf("prune once published: %+v, %v; want the 2 processed rows and the 2 events", n, err)
	}
}
