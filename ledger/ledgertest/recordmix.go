package ledgertest

import (
	"errors"
	"strconv"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testRecordMixed: one batch holding every kind of delivery a plain drain
// records, each decided against the right row: a redelivery of a msg_id
// processed before (its owner is that row, whatever else of the msg_id
// the batch holds), a first delivery and later ones of a new msg_id (their
// owner is the first), a dead letter, and deliveries that come without a
// content hash (compared by their message's). Engines that record a batch
// in one statement (PostgreSQL) decide all of this in SQL; the others in
// a transaction; the results and the rows must be the same.
func testRecordMixed(t *testing.T, db *ledger.DB) {
	recordMixed(t, db, func(batch ...*spool.Delivery) []spool.Result { return record(t, db, batch...) })
}

// testRecordBatchMixed: testRecordMixed's batch as a batch file's records
// (RecordBatch, with the file's progress), which SQLite records by another
// path (a lookup, then an INSERT without RETURNING): the same results and
// rows. A record whose claim is already a processed row's is refused, and
// leaves nothing.
func testRecordBatchMixed(t *testing.T, db *ledger.DB) {
	p := spool.BatchProgress{File: "mix:1:2:3", Batch: "mix"}
	n := 0
	recordBatch := func(batch ...*spool.Delivery) []spool.Result {
		t.Helper()
		n++
		p.Position = strconv.Itoa(n)
		res, err := db.Consumer().RecordBatch(t.Context(), batch, spool.Work{}, p)
		if err != nil {
			t.Fatalf("RecordBatch: %v", err)
		}
		if len(res) != len(batch) {
			t.Fatalf("RecordBatch: %d results for %d deliveries", len(res), len(batch))
		}
		return res
	}
	recordMixed(t, db, recordBatch)
	again := []*spool.Delivery{valid("new-z", msg{ID: "z", Amount: "1"}), valid("n-first", msg{ID: "n", Amount: "1"})}
	q := p
	q.Position = "again"
	if _, err := db.Consumer().RecordBatch(t.Context(), again, spool.Work{}, q); !errors.Is(err, ledger.ErrBadDelivery) {
		t.Fatalf("RecordBatch of a claim processed already: %v, want ErrBadDelivery", err)
	}
	if _, ok := processedRow(t, db, "z"); ok {
		t.Error("z processed by a batch that failed")
	}
	if got, _, err := db.Consumer().BatchProgress(t.Context(), p.File); err != nil || got.Position != p.Position {
		t.Errorf("BatchProgress after a failed batch = %+v, %v; want position %s", got, err, p.Position)
	}
}

// recordMixed is testRecordMixed with record as the way batches are
// recorded.
func recordMixed(t *testing.T, db *ledger.DB, record func(batch ...*spool.Delivery) []spool.Result) {
	record(
		valid("old-a", msg{ID: "a", Amount: "1"}),
		valid("old-b", msg{ID: "b", Amount: "1"}))
	noHash := func(d *spool.Delivery) *spool.Delivery { d.Hash = ""; return d }
	batch := []*spool.Delivery{
		valid("a-same", msg{ID: "a", Amount: "1"}),
		valid("b-other", msg{ID: "b", Amount: "2"}),
		valid("a-other", msg{ID: "a", Amount: "3"}),
		valid("n-first", msg{ID: "n", Amount: "1"}),
		valid("n-other", msg{ID: "n", Amount: "2"}),
		noHash(valid("n-same", msg{ID: "n", Amount: "1"})),
		rejected("dead", "dead.json", 7, spool.ReasonParse, "", "not JSON"),
		// The same content as b's processed row, not as b-other before it.
		noHash(valid("b-same", msg{ID: "b", Amount: "1"})),
		noHash(valid("m-first", msg{ID: "m", Amount: "1"})),
		valid("m-same", msg{ID: "m", Amount: "1"}),
	}
	type want struct {
		outcome  spool.Outcome
		conflict bool
	}
	dup, conflict := want{spool.OutcomeDuplicate, false}, want{spool.OutcomeDuplicate, true}
	wants := []want{dup, conflict, conflict, {spool.OutcomeProcessed, false}, conflict, dup,
		{spool.OutcomeDeadLetter, false}, dup, {spool.OutcomeProcessed, false}, dup}
	res := record(batch...)
	for i, r := range res {
		if r.Outcome != wants[i].outcome || r.Conflict != wants[i].conflict {
			t.Errorf("%s: %s, conflict %v; want %s, %v", batch[i].Claim, r.Outcome, r.Conflict, wants[i].outcome, wants[i].conflict)
		}
	}
	for i, d := range batch {
		var id string
		if d.Message != nil {
			id = d.Message.MsgID
		}
		if o, ok := claimOutcome(t, db, d.Claim, id); !ok || o != wants[i].outcome {
			t.Errorf("ClaimOutcome(%s) = %q, %v; want %s", d.Claim, o, ok, wants[i].outcome)
		}
	}
	for id, claim := range map[string]string{"a": "old-a", "b": "old-b", "n": "n-first", "m": "m-first"} {
		if r, ok := processedRow(t, db, id); !ok || r.Claim != claim {
			t.Errorf("processed %s: claim %q, %v; want %s", id, r.Claim, ok, claim)
		}
	}
	if n := count(t, db, "SELECT COUNT(*) FROM processed"); n != 4 {
		t.Errorf("processed rows = %d, want 4", n)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM deliveries"); n != 8 {
		t.Errorf("deliveries rows = %d, want 8 (seven duplicates, one dead letter)", n)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM deliveries WHERE conflict = 1"); n != 3 {
		t.Errorf("deliveries rows flagged conflict = %d, want 3", n)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM deliveries WHERE claim = 'n-same' AND content_hash IS NULL"); n != 1 {
		t.Errorf("n-same's deliveries row: %d with no content hash, want 1 (the delivery came without one)", n)
	}
}
