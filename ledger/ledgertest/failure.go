package ledgertest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testFailingBatch: a batch that fails part-way commits nothing and returns
// no results, so the consumer moves no file (I3, I4).
func testFailingBatch(t *testing.T, db *ledger.DB) {
	a := valid("c1", msg{ID: "m1", OrderNo: "A", Seq: 1, Amount: "1"})
	b := rejected("c2", "bad.json", 7, spool.ReasonParse, "", "x")
	// The same claim again, after its processed row went in: refused
	// part-way through the transaction.
	c := valid("c1", msg{ID: "m1", OrderNo: "A", Seq: 1, Amount: "1"})
	res, err := db.Consumer().Record(t.Context(), []*spool.Delivery{a, b, c}, spool.Work{})
	if err == nil {
		t.Fatal("Record with a claim twice: nil error, want one")
	}
	if res != nil {
		t.Errorf("results of a failed batch = %+v, want none", res)
	}
	assertEmpty(t, db)

	// The failed transaction left nothing locked: the batch, fixed, goes in.
	c.Claim = "c3"
	res = record(t, db, a, b, c)
	if got, want := outcomes(res...), []spool.Outcome{spool.OutcomeProcessed, spool.OutcomeDeadLetter, spool.OutcomeDuplicate}; !reflect.DeepEqual(got, want) {
		t.Errorf("outcomes after retry = %q, want %q", got, want)
	}
}

func assertEmpty(t *testing.T, db *ledger.DB) {
	t.Helper()
	for _, c := range []struct{ claim, msgID string }{{"c1", "m1"}, {"c2", "m2"}, {"c2", ""}} {
		if o, ok := claimOutcome(t, db, c.claim, c.msgID); ok {
			t.Errorf("ClaimOutcome(%s, %s) = %q after a failed batch, want not found", c.claim, c.msgID, o)
		}
	}
	for _, id := range []string{"m1", "m2"} {
		if _, ok := processedRow(t, db, id); ok {
			t.Errorf("Processed(%s) found after a failed batch", id)
		}
	}
	for _, table := range []string{"processed", "deliveries"} {
		if n := count(t, db, "SELECT COUNT(*) FROM "+table); n != 0 {
			t.Errorf("%s rows after a failed batch = %d, want 0", table, n)
		}
	}
}

// testClaimRecordedTwice: a claim is recorded at most once, across batches;
// a consumer recovering a claim must ask ClaimOutcome first (I7).
func testClaimRecordedTwice(t *testing.T, db *ledger.DB) {
	first := valid("c1", msg{ID: "m1"})
	record(t, db, first)
	other := valid("c9", msg{ID: "m9"})
	again := valid("c1", msg{ID: "m1"})
	res, err := db.Consumer().Record(t.Context(), []*spool.Delivery{other, again}, spool.Work{})
	if err == nil {
		t.Fatal("Record of an already recorded claim: nil error, want one")
	}
	if res != nil {
		t.Errorf("results = %+v, want none", res)
	}
	if _, ok := processedRow(t, db, "m9"); ok {
		t.Error("Processed(m9) found: the failed batch was partly committed")
	}
	if o, ok := claimOutcome(t, db, "c1", "m1"); !ok || o != spool.OutcomeProcessed {
		t.Errorf("ClaimOutcome(c1) = %q, %v, want processed, true", o, ok)
	}
}

func testBadDelivery(t *testing.T, db *ledger.DB) {
	good := valid("ok", msg{ID: "ok"})
	noClaim := valid("", msg{ID: "m1"})
	neither := valid("c2", msg{ID: "m2"})
	neither.Message = nil
	both := valid("c3", msg{ID: "m3"})
	both.Reject = &spool.RejectError{Reason: spool.ReasonParse}
	noID := valid("c4", msg{ID: ""})
	noReason := rejected("c5", "x.json", 5, "", "", "why?")
	for name, bad := range map[string]*spool.Delivery{
		"no claim": noClaim, "neither": neither, "both": both, "no msg_id": noID, "no reason": noReason, "nil": nil,
	} {
		res, err := db.Consumer().Record(t.Context(), []*spool.Delivery{good, bad}, spool.Work{})
		if !errors.Is(err, ledger.ErrBadDelivery) {
			t.Errorf("Record(%s) = %v, want ErrBadDelivery", name, err)
		}
		if res != nil {
			t.Errorf("Record(%s): results %+v, want none", name, res)
		}
	}
	if n := count(t, db, "SELECT COUNT(*) FROM deliveries"); n != 0 {
		t.Errorf("deliveries = %d after bad batches, want 0", n)
	}
}

func testEmptyBatch(t *testing.T, db *ledger.DB) {
	if res, err := db.Consumer().Record(t.Context(), nil, spool.Work{}); err != nil || len(res) != 0 {
		t.Errorf("Record(nil) = %+v, %v, want no results and nil", res, err)
	}
}

// testUncleanText: a file name that is not UTF-8, or a detail holding NUL,
// must not fail the batch on any engine; they are stored with U+FFFD.
func testUncleanText(t *testing.T, db *ledger.DB) {
	dl := rejected("c1", "caf\xe9.json", 11, spool.ReasonParse, "", "bad byte \x00 at 3")
	p := valid("c2", msg{ID: "m1"})
	p.File = "r\xe9sum\xe9.json"
	record(t, db, dl, p)
	got, ok, err := deadLetterOf(t, db, 11)
	if err != nil || !ok {
		t.Fatalf("DeadLetterByIno(11) = %v, %v", ok, err)
	}
	if got.File != "caf\uFFFD.json" || got.Detail != "bad byte \uFFFD at 3" {
		t.Errorf("dead letter file, detail = %q, %q, want %q, %q", got.File, got.Detail, "caf\uFFFD.json", "bad byte \uFFFD at 3")
	}
	r, _ := processedRow(t, db, "m1")
	if r.File != "r\uFFFDsum\uFFFD.json" {
		t.Errorf("processed file = %q, want %q", r.File, "r\uFFFDsum\uFFFD.json")
	}
}

// testViews: the operator views exist and select what they say.
func testViews(t *testing.T, db *ledger.DB) {
	record(t, db,
		valid("c1", msg{ID: "m1"}), valid("c2", msg{ID: "m1"}), valid("c3", msg{ID: "m1"}),
		rejected("c4", "x.json", 4, spool.ReasonTooLarge, "", "2 MiB"))
	if n := count(t, db, "SELECT COUNT(*) FROM duplicates WHERE msg_id = 'm1'"); n != 2 {
		t.Errorf("duplicates view rows = %d, want 2", n)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM dead_letters WHERE reason = 'too-large' AND detail = '2 MiB'"); n != 1 {
		t.Errorf("dead_letters view rows = %d, want 1", n)
	}
}

func testClosed(t *testing.T, db *ledger.DB) {
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	d := valid("c1", msg{ID: "m1"})
	if _, err := db.Consumer().Record(t.Context(), []*spool.Delivery{d}, spool.Work{}); !errors.Is(err, spool.ErrLedgerClosed) {
		t.Errorf("Record after Close = %v, want ErrLedgerClosed", err)
	}
	if _, _, err := db.Consumer().ClaimOutcome(t.Context(), "c1", "m1"); !errors.Is(err, spool.ErrLedgerClosed) {
		t.Errorf("ClaimOutcome after Close = %v, want ErrLedgerClosed", err)
	}
	if _, err := db.Messages().Stats(t.Context()); !errors.Is(err, spool.ErrLedgerClosed) {
		t.Errorf("Stats after Close = %v, want ErrLedgerClosed", err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}
