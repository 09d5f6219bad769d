package ledgertest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

func reserve(t *testing.T, db *ledger.DB, owner string, batch ...*spool.Delivery) []spool.Outcome {
	t.Helper()
	return reserveFor(t, db, spool.CallOwner{Session: owner}, batch...)
}

// reserveFor is reserve for an owner with its call bound.
func reserveFor(t *testing.T, db *ledger.DB, owner spool.CallOwner, batch ...*spool.Delivery) []spool.Outcome {
	t.Helper()
	res, err := db.Consumer().Reserve(context.Background(), batch, owner)
	if err != nil {
		t.Fatalf("reserve: %v", err)
	}
	return outcomes(res...)
}

func settle(t *testing.T, db *ledger.DB, batch []*spool.Delivery, errs []error) []spool.Outcome {
	t.Helper()
	decide := spool.Retry{NoJitter: true}.Decide
	res, err := db.Consumer().Settle(context.Background(), batch, errs, decide)
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	return outcomes(res...)
}

// testReserveSettle: a reserved msg_id is busy for every other delivery
// until its call is settled; then a success makes them duplicates, a
// transient failure frees the msg_id for the next delivery, and the
// reservation is gone either way.
func testReserveSettle(t *testing.T, db *ledger.DB) {
	a1, a2, a3 := valid("c-a1", msg{ID: "a"}), valid("c-a2", msg{ID: "a"}), valid("c-a3", msg{ID: "a"})
	b1, b2 := valid("c-b1", msg{ID: "b"}), valid("c-b2", msg{ID: "b"})
	poison := rejected("c-p", "p.json", 77, spool.ReasonParse, "", "not JSON")
	got := reserve(t, db, "s1", a1, a2, b1, poison)
	want := []spool.Outcome{spool.OutcomeReserved, spool.OutcomeBusy, spool.OutcomeReserved, spool.OutcomeDeadLetter}
	if !slices.Equal(got, want) {
		t.Fatalf("first reserve: %v, want %v", got, want)
	}
	if got := reserve(t, db, "s2", a3, b2); !slices.Equal(got, []spool.Outcome{spool.OutcomeBusy, spool.OutcomeBusy}) {
		t.Fatalf("reserve by another owner while in flight: %v, want both busy", got)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM processed"); n != 0 {
		t.Fatalf("processed rows before any settle: %d", n)
	}
	got = settle(t, db, []*spool.Delivery{a1, b1}, []error{nil, errors.New("503")})
	if !slices.Equal(got, []spool.Outcome{spool.OutcomeProcessed, spool.OutcomeRetry}) {
		t.Fatalf("settle: %v, want processed and retry", got)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM reservations"); n != 0 {
		t.Errorf("reservations after settle: %d, want 0", n)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM attempts WHERE msg_id = 'b'"); n != 1 {
		t.Errorf("attempts of b: %d rows, want 1", n)
	}
	// a succeeded: its redelivery is a duplicate at once. b failed
	// transiently: the next delivery may be called.
	if got := reserve(t, db, "s2", a3, b2); !slices.Equal(got, []spool.Outcome{spool.OutcomeDuplicate, spool.OutcomeReserved}) {
		t.Fatalf("reserve after settle: %v, want duplicate and reserved", got)
	}
	if got := settle(t, db, []*spool.Delivery{b2}, []error{nil}); !slices.Equal(got, []spool.Outcome{spool.OutcomeProcessed}) {
		t.Fatalf("settle b2: %v", got)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM attempts"); n != 0 {
		t.Errorf("attempts after b succeeded: %d, want 0", n)
	}
	if o, ok := claimOutcome(t, db, "c-a3", "a"); !ok || o != spool.OutcomeDuplicate {
		t.Errorf("claim c-a3: %v %v, want a recorded duplicate", o, ok)
	}
	if o, ok := claimOutcome(t, db, "c-p", ""); !ok || o != spool.OutcomeDeadLetter {
		t.Errorf("claim c-p: %v %v, want a recorded dead letter", o, ok)
	}
}

// testSettleLostReservation: a group of calls that all succeeded, one of
// whose msg_ids was processed by another delivery after its reservation
// was lost (its owner taken for dead and released): that one is a
// duplicate, a conflict as its content differs, and the others are
// processed, their attempts cleared, every reservation of the group gone;
// all of it in one transaction, whatever path the engine's settle takes.
func testSettleLostReservation(t *testing.T, db *ledger.DB) {
	x0, x1 := valid("c-x0", msg{ID: "x"}), valid("c-x1", msg{ID: "x"})
	y1, y2 := valid("c-y1", msg{ID: "y"}), valid("c-y2", msg{ID: "y", Amount: "2.00"})
	z1 := valid("c-z1", msg{ID: "z"})
	reserve(t, db, "s0", x0)
	if got := settle(t, db, []*spool.Delivery{x0}, []error{errors.New("503")}); !slices.Equal(got, []spool.Outcome{spool.OutcomeRetry}) {
		t.Fatalf("settle of a failed call: %v, want retry", got)
	}
	if got := reserve(t, db, "s1", x1, y1, z1); !slices.Equal(got, []spool.Outcome{spool.OutcomeReserved, spool.OutcomeReserved, spool.OutcomeReserved}) {
		t.Fatalf("reserve: %v, want all reserved", got)
	}
	if _, err := db.Consumer().ReleaseReservations(context.Background(), "s1"); err != nil {
		t.Fatalf("release: %v", err)
	}
	reserve(t, db, "s2", y2)
	if got := settle(t, db, []*spool.Delivery{y2}, []error{nil}); !slices.Equal(got, []spool.Outcome{spool.OutcomeProcessed}) {
		t.Fatalf("settle of the other delivery of y: %v", got)
	}
	decide := spool.Retry{NoJitter: true}.Decide
	res, err := db.Consumer().Settle(context.Background(), []*spool.Delivery{z1, x1, y1}, []error{nil, nil, nil}, decide)
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	if got := outcomes(res...); !slices.Equal(got, []spool.Outcome{spool.OutcomeProcessed, spool.OutcomeProcessed, spool.OutcomeDuplicate}) {
		t.Fatalf("settle after the lost reservation: %v, want processed, processed, duplicate", got)
	}
	if !res[2].Conflict || res[0].Conflict || res[1].Conflict {
		t.Errorf("conflicts %v %v %v, want only y's", res[0].Conflict, res[1].Conflict, res[2].Conflict)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM processed"); n != 3 {
		t.Errorf("processed rows: %d, want 3", n)
	}
	if r, ok := processedRow(t, db, "y"); !ok || r.Claim != "c-y2" {
		t.Errorf("y's processed row: %+v %v, want the other delivery's (c-y2)", r, ok)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM attempts"); n != 0 {
		t.Errorf("attempts after x succeeded: %d, want 0", n)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM reservations"); n != 0 {
		t.Errorf("reservations after the settle: %d, want 0", n)
	}
	if o, ok := claimOutcome(t, db, "c-y1", "y"); !ok || o != spool.OutcomeDuplicate {
		t.Errorf("claim c-y1: %v %v, want a recorded duplicate", o, ok)
	}
}

// testReleaseReservations: the owners are listed with the longest call
// bound their reservations were made with (none for reservations that
// recorded none); the reservations of a dead owner are removed, those of
// others kept.
func testReleaseReservations(t *testing.T, db *ledger.DB) {
	ctx := context.Background()
	reserveFor(t, db, spool.CallOwner{Session: "dead", CallBound: 90 * time.Second}, valid("c-x", msg{ID: "x"}))
	reserveFor(t, db, spool.CallOwner{Session: "dead", CallBound: 1500 * time.Millisecond}, valid("c-y", msg{ID: "y"}))
	reserve(t, db, "live", valid("c-z", msg{ID: "z"}))
	owners, err := db.Consumer().ReservationOwners(ctx)
	slices.SortFunc(owners, func(a, b spool.CallOwner) int { return strings.Compare(a.Session, b.Session) })
	want := []spool.CallOwner{{Session: "dead", CallBound: 90 * time.Second}, {Session: "live"}}
	if err != nil || !slices.Equal(owners, want) {
		t.Fatalf("owners %v, %v; want %v", owners, err, want)
	}
	if n, err := db.Consumer().ReleaseReservations(ctx, "dead"); err != nil || n != 2 {
		t.Fatalf("release: %d, %v; want 2", n, err)
	}
	if got := reserve(t, db, "other", valid("c-x2", msg{ID: "x"}), valid("c-z2", msg{ID: "z"})); !slices.Equal(got, []spool.Outcome{spool.OutcomeReserved, spool.OutcomeBusy}) {
		t.Fatalf("after release: %v, want x reserved and z busy", got)
	}
}

// testReleaseClaims: ReleaseClaims removes the reservations an owner
// holds for the claims named, and no other: not its other claims', not
// another owner's of the same claim names.
func testReleaseClaims(t *testing.T, db *ledger.DB) {
	ctx := context.Background()
	reserve(t, db, "dead", valid("c-x", msg{ID: "x"}), valid("c-y", msg{ID: "y"}), valid("c-w", msg{ID: "w"}))
	reserve(t, db, "live", valid("c-z", msg{ID: "z"}))
	if n, err := db.Consumer().ReleaseClaims(ctx, "dead", []string{"c-x", "c-w", "c-z", "c-none"}); err != nil || n != 2 {
		t.Fatalf("ReleaseClaims: %d, %v; want 2", n, err)
	}
	if n, err := db.Consumer().ReleaseClaims(ctx, "dead", nil); err != nil || n != 0 {
		t.Fatalf("ReleaseClaims of none: %d, %v", n, err)
	}
	got := reserve(t, db, "other", valid("c-x2", msg{ID: "x"}), valid("c-y2", msg{ID: "y"}),
		valid("c-w2", msg{ID: "w"}), valid("c-z2", msg{ID: "z"}))
	want := []spool.Outcome{spool.OutcomeReserved, spool.OutcomeBusy, spool.OutcomeReserved, spool.OutcomeBusy}
	if !slices.Equal(got, want) {
		t.Fatalf("after ReleaseClaims: %v, want %v (x and w released; y and live's z held)", got, want)
	}
}
