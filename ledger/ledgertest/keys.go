package ledgertest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

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

// testLongKey: a msg_id up to the engine's key limit (Dialect.MaxKey,
// spool.MaxKeyLen at least) is kept exactly in every table that keys or
// indexes it: processed, a duplicate's deliveries row, a reservation, a
// retry's attempts row. A longer one is a dead letter (invalid-field
// msg_id), by Record and Reserve alike, never cut short into another
// message's key and never failing its batch; a longer claim is the
// caller's error. An engine without a limit keeps a 64 KiB msg_id. The
// keys are random: PostgreSQL compresses a btree entry that compresses,
// so a repeated letter would pass a limit that a real key does not.
func testLongKey(t *testing.T, db *ledger.DB) {
	limit := db.Dialect().MaxKey()
	if limit <= 0 {
		id := randomKey(64 << 10)
		if r := record(t, db, valid("c-long", msg{ID: id}))[0]; r.Outcome != spool.OutcomeProcessed {
			t.Fatalf("a 64 KiB msg_id: %s, want processed", r.Outcome)
		}
		if r, ok := processedRow(t, db, id); !ok || r.MsgID != id {
			t.Errorf("the 64 KiB msg_id did not read back exactly")
		}
		return
	}
	if limit < spool.MaxKeyLen {
		t.Errorf("MaxKey %d is below spool.MaxKeyLen %d: a message Parse accepts would be a dead letter here", limit, spool.MaxKeyLen)
	}
	fits := randomKey(limit)
	over := randomKey(limit + 1)
	res := record(t, db, valid("c-fits", msg{ID: fits}), valid("c-over", msg{ID: over}), valid("c-short", msg{ID: "short"}))
	if res[0].Outcome != spool.OutcomeProcessed || res[2].Outcome != spool.OutcomeProcessed {
		t.Errorf("msg_id of %d bytes (the limit) and a short one: %s, %s; want both processed", limit, res[0].Outcome, res[2].Outcome)
	}
	if r := res[1]; r.Outcome != spool.OutcomeDeadLetter || r.Reject == nil ||
		r.Reject.Reason != spool.ReasonInvalidField || r.Reject.Field != "msg_id" || !strings.Contains(r.Reject.Detail, strconv.Itoa(limit)) {
		t.Errorf("msg_id of %d bytes: %+v, want a dead letter, invalid-field msg_id with the limit", limit+1, r)
	}
	if r, ok := processedRow(t, db, fits); !ok || r.MsgID != fits || r.Claim != "c-fits" {
		t.Errorf("the msg_id at the limit did not read back exactly")
	}
	if o, ok := claimOutcome(t, db, "c-over", ""); !ok || o != spool.OutcomeDeadLetter {
		t.Errorf("claim of the long msg_id: %q, %v; want recorded as a dead letter", o, ok)
	}
	if r := record(t, db, valid("c-fits-again", msg{ID: fits}))[0]; r.Outcome != spool.OutcomeDuplicate {
		t.Errorf("redelivery of the msg_id at the limit: %s, want duplicate", r.Outcome)
	}

	reserved := randomKey(limit)
	rr, err := db.Consumer().Reserve(t.Context(), []*spool.Delivery{valid("c-res", msg{ID: reserved}), valid("c-over-2", msg{ID: over + "y"})}, spool.CallOwner{Session: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if rr[0].Outcome != spool.OutcomeReserved {
		t.Errorf("Reserve of a msg_id at the limit: %s, want reserved", rr[0].Outcome)
	}
	if rr[1].Outcome != spool.OutcomeDeadLetter || rr[1].Reject == nil || rr[1].Reject.Field != "msg_id" {
		t.Errorf("Reserve of a long msg_id: %+v, want a dead letter", rr[1])
	}
	if n := count(t, db, "SELECT COUNT(*) FROM reservations"); n != 1 {
		t.Errorf("reservations = %d, want the one at the limit only", n)
	}

	retried := randomKey(limit)
	fail := spool.HandlerFunc(func(context.Context, *sql.Tx, *spool.Delivery) error { return errors.New("down") })
	w := spool.Work{Handler: fail, Decide: (&decider{verdict: retryIn(time.Hour)}).decide}
	if r := recordWork(t, db, w, valid("c-retry", msg{ID: retried}))[0]; r.Outcome != spool.OutcomeRetry {
		t.Errorf("a failed msg_id at the limit: %s, want retry (an attempts row)", r.Outcome)
	}

	long := valid(randomKey(limit+1), msg{ID: "claimed"})
	if _, err := db.Consumer().Record(t.Context(), []*spool.Delivery{long}, spool.Work{}); !errors.Is(err, ledger.ErrBadDelivery) {
		t.Errorf("a claim of %d bytes: %v, want ErrBadDelivery", limit+1, err)
	}
}

// testLongFields: on every engine, a message that Contract.Parse would
// refuse for its order key's or amount's length (spool.MaxKeyLen,
// spool.MaxAmountLen), built by a library caller, is a dead letter naming
// the field and the limit, and never stored cut short (MariaDB's BLOBs
// hold 65 535 bytes, and INSERT IGNORE cuts); the rest of its batch is
// processed, and the values at the limits are kept exactly.
func testLongFields(t *testing.T, db *ledger.DB) {
	amount := "1" + strings.Repeat("0", spool.MaxAmountLen-1)
	order := randomKey(spool.MaxKeyLen)
	res := record(t, db,
		valid("c-fits", msg{ID: "fits", OrderNo: order, Seq: 1, Amount: amount}),
		valid("c-order", msg{ID: "order", OrderNo: randomKey(70000), Seq: 1, Amount: "1"}),
		valid("c-amount", msg{ID: "amount", OrderNo: "o", Seq: 1, Amount: "1" + strings.Repeat("0", 70000)}),
		valid("c-ok", msg{ID: "ok", OrderNo: "o", Seq: 1, Amount: "1"}))
	if res[0].Outcome != spool.OutcomeProcessed || res[3].Outcome != spool.OutcomeProcessed {
		t.Errorf("fits, ok: %s, %s; want processed", res[0].Outcome, res[3].Outcome)
	}
	for i, field := range map[int]string{1: "order_no", 2: "amount"} {
		r := res[i]
		if r.Outcome != spool.OutcomeDeadLetter || r.Reject == nil || r.Reject.Reason != spool.ReasonInvalidField ||
			r.Reject.Field != field || !strings.Contains(r.Reject.Detail, "1024") {
			t.Errorf("an over-long %s: %+v, want a dead letter, invalid-field %s with the limit", field, r, field)
		}
	}
	if r, ok := processedRow(t, db, "fits"); !ok || r.OrderNo != order || string(r.Amount) != amount {
		t.Errorf("the order key and amount at the limits did not read back exactly")
	}
	for _, id := range []string{"order", "amount"} {
		if _, ok := processedRow(t, db, id); ok {
			t.Errorf("%s was stored", id)
		}
	}

	// A library caller's dead letter with a field and a detail longer
	// than a column holds (MariaDB's TEXT: 65 535 bytes) is kept, cut.
	huge := strings.Repeat("é", 40000)
	if r := record(t, db, rejected("c-huge", "huge.json", 7, spool.ReasonInvalidField, huge, huge))[0]; r.Outcome != spool.OutcomeDeadLetter {
		t.Errorf("a dead letter with a huge field and detail: %s", r.Outcome)
	}
	if o, ok := claimOutcome(t, db, "c-huge", ""); !ok || o != spool.OutcomeDeadLetter {
		t.Errorf("the huge dead letter: %q, %v; want recorded", o, ok)
	}
}

// randomKey is n bytes of random URL-safe base64: text that does not
// compress.
func randomKey(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)[:n]
}
