package ledgertest

import (
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testExactKeys: msg_ids are compared byte for byte, as I2 needs: ids
// that differ only in case, in trailing spaces or in Unicode normalisation
// are different messages on every engine, whatever its collation, and
// each reads back exactly.
func testExactKeys(t *testing.T, db *ledger.DB) {
	ids := []string{"key", "KEY", "Key", "key ", "key  ", "caf\u00e9", "cafe\u0301", "ß", "ss"}
	var batch []*spool.Delivery
	for i, id := range ids {
		batch = append(batch, valid("c-"+string(rune('a'+i)), msg{ID: id}))
	}
	for i, r := range record(t, db, batch...) {
		if r.Outcome != spool.OutcomeProcessed {
			t.Errorf("msg_id %q: %s, want processed (a distinct key)", ids[i], r.Outcome)
		}
	}
	for i, id := range ids {
		r, ok := processedRow(t, db, id)
		if !ok || r.MsgID != id || r.Claim != batch[i].Claim {
			t.Errorf("Processed(%q) = %+v, %v; want the row of %s", id, r, ok, batch[i].Claim)
		}
	}
	// And a redelivery of each is a duplicate of its own key only.
	var again []*spool.Delivery
	for i, id := range ids {
		again = append(again, valid("again-"+string(rune('a'+i)), msg{ID: id}))
	}
	for i, r := range record(t, db, again...) {
		if r.Outcome != spool.OutcomeDuplicate || r.Conflict {
			t.Errorf("redelivery of %q: %s (conflict %v), want a plain duplicate", ids[i], r.Outcome, r.Conflict)
		}
	}
}

// testLongKey: a msg_id up to the engine's key limit (Dialect.MaxKey) is
// kept exactly; a longer one is a dead letter (invalid-field msg_id), by
// Record and Reserve alike, and never cut short into another message's
// key. An engine without a limit keeps a 64 KiB msg_id.
func testLongKey(t *testing.T, db *ledger.DB) {
	limit := db.Dialect().MaxKey()
	if limit <= 0 {
		id := strings.Repeat("k", 64<<10)
		if r := record(t, db, valid("c-long", msg{ID: id}))[0]; r.Outcome != spool.OutcomeProcessed {
			t.Fatalf("a 64 KiB msg_id: %s, want processed", r.Outcome)
		}
		if r, ok := processedRow(t, db, id); !ok || r.MsgID != id {
			t.Errorf("the 64 KiB msg_id did not read back exactly")
		}
		return
	}
	fits := strings.Repeat("k", limit)
	over := fits + "x"
	res := record(t, db, valid("c-fits", msg{ID: fits}), valid("c-over", msg{ID: over}))
	if res[0].Outcome != spool.OutcomeProcessed {
		t.Errorf("msg_id of %d bytes (the limit): %s, want processed", limit, res[0].Outcome)
	}
	if r := res[1]; r.Outcome != spool.OutcomeDeadLetter || r.Reject == nil ||
		r.Reject.Reason != spool.ReasonInvalidField || r.Reject.Field != "msg_id" {
		t.Errorf("msg_id of %d bytes: %+v, want a dead letter, invalid-field msg_id", limit+1, r)
	}
	if r, ok := processedRow(t, db, fits); !ok || r.MsgID != fits || r.Claim != "c-fits" {
		t.Errorf("the msg_id at the limit did not read back exactly")
	}
	if o, ok := claimOutcome(t, db, "c-over", ""); !ok || o != spool.OutcomeDeadLetter {
		t.Errorf("claim of the long msg_id: %q, %v; want recorded as a dead letter", o, ok)
	}
	rr, err := db.Reserve(t.Context(), []*spool.Delivery{valid("c-over-2", msg{ID: over + "y"})}, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if rr[0].Outcome != spool.OutcomeDeadLetter || rr[0].Reject == nil || rr[0].Reject.Field != "msg_id" {
		t.Errorf("Reserve of a long msg_id: %+v, want a dead letter", rr[0])
	}
	if n := count(t, db, "SELECT COUNT(*) FROM reservations"); n != 0 {
		t.Errorf("reservations = %d, want none for a long msg_id", n)
	}
}
