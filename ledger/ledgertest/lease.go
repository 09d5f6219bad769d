package ledgertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testLeases: on an engine that keeps leases, a session's lease is live
// for another handle until it expires by the database's clock; then the
// other handle takes it over, and from then on every write of the
// session's claims through the handle that acquired it (Record, Reserve,
// Settle) fails with ErrLeaseLost and commits nothing, and its renewal
// fails the same way. Writes for sessions whose lease this handle did not
// acquire are not checked. On an engine that keeps none (SQLite), the
// lease methods refuse and the writes go on as before.
func testLeases(t *testing.T, a, b *ledger.DB) {
	ctx := context.Background()
	const lease = 1500 * time.Millisecond
	const own = "s-own@host-a"
	mine := func(d *spool.Delivery) *spool.Delivery { d.Consumer = own; return d }
	if !a.Consumer().HoldsLeases() {
		if err := a.Consumer().AcquireSessionLease(ctx, own, lease); err == nil {
			t.Fatal("AcquireSessionLease on an engine that keeps no leases: no error")
		}
		if got := record(t, a, mine(valid("c-1", msg{ID: "one"}))); got[0].Outcome != spool.OutcomeProcessed {
			t.Fatalf("record without leases: %v", got)
		}
		return
	}
	if st, err := b.Consumer().TakeOverSessionLease(ctx, own); err != nil || st != spool.LeaseUnknown {
		t.Fatalf("take over a lease never acquired: %v, %v; want LeaseUnknown", st, err)
	}
	if err := a.Consumer().AcquireSessionLease(ctx, own, lease); err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if got := record(t, a, mine(valid("c-1", msg{ID: "one"}))); got[0].Outcome != spool.OutcomeProcessed {
		t.Fatalf("record under a live lease: %v", got)
	}
	res, err := a.Consumer().Reserve(ctx, []*spool.Delivery{mine(valid("c-2", msg{ID: "two"}))}, spool.CallOwner{Session: own})
	if err != nil || res[0].Outcome != spool.OutcomeReserved {
		t.Fatalf("reserve under a live lease: %v, %v", res, err)
	}
	if st, err := b.Consumer().TakeOverSessionLease(ctx, own); err != nil || st != spool.LeaseLive {
		t.Fatalf("take over a live lease: %v, %v; want LeaseLive", st, err)
	}
	if err := a.Consumer().RenewSessionLease(ctx, own, lease); err != nil {
		t.Fatalf("renew a live lease: %v", err)
	}
	// Expired by the database's clock: the takeover waits for it.
	deadline := time.Now().Add(10 * lease)
	for {
		st, err := b.Consumer().TakeOverSessionLease(ctx, own)
		if err != nil {
			t.Fatalf("take over: %v", err)
		}
		if st == spool.LeaseTaken {
			break
		}
		if st != spool.LeaseLive || time.Now().After(deadline) {
			t.Fatalf("take over an expired lease: %v, want LeaseTaken within %v", st, 10*lease)
		}
		time.Sleep(lease / 10)
	}
	if st, err := b.Consumer().TakeOverSessionLease(ctx, own); err != nil || st != spool.LeaseTaken {
		t.Fatalf("take over again: %v, %v; want LeaseTaken", st, err)
	}
	lost := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, spool.ErrLeaseLost) {
			t.Errorf("%s after the takeover: %v, want ErrLeaseLost", what, err)
		}
	}
	_, err = a.Consumer().Record(ctx, []*spool.Delivery{mine(valid("c-3", msg{ID: "three"}))}, spool.Work{})
	lost("record", err)
	_, err = a.Consumer().Reserve(ctx, []*spool.Delivery{mine(valid("c-4", msg{ID: "four"}))}, spool.CallOwner{Session: own})
	lost("reserve", err)
	_, err = a.Consumer().Settle(ctx, []*spool.Delivery{mine(valid("c-2", msg{ID: "two"}))}, []error{nil}, spool.Retry{}.Decide)
	lost("settle", err)
	lost("renew", a.Consumer().RenewSessionLease(ctx, own, lease))
	if n := count(t, a, "SELECT COUNT(*) FROM processed"); n != 1 {
		t.Errorf("processed rows: %d, want 1 (only the record made before the takeover)", n)
	}
	if n := count(t, a, "SELECT COUNT(*) FROM deliveries"); n != 0 {
		t.Errorf("deliveries rows: %d, want 0", n)
	}
	if n := count(t, a, "SELECT COUNT(*) FROM reservations"); n != 1 {
		t.Errorf("reservations: %d, want 1 (the settle that found its lease taken removes none)", n)
	}
	// Another session's writes through the same handle are not fenced.
	if got := record(t, a, valid("c-5", msg{ID: "five"})); got[0].Outcome != spool.OutcomeProcessed {
		t.Errorf("record of a session without a lease: %v", got)
	}
	if err := b.Consumer().DropSessionLease(ctx, own); err != nil {
		t.Fatalf("drop: %v", err)
	}
	if st, err := b.Consumer().TakeOverSessionLease(ctx, own); err != nil || st != spool.LeaseUnknown {
		t.Errorf("take over a dropped lease: %v, %v; want LeaseUnknown", st, err)
	}
	// Gone is lost too, for the handle that held it.
	_, err = a.Consumer().Record(ctx, []*spool.Delivery{mine(valid("c-6", msg{ID: "six"}))}, spool.Work{})
	lost("record after the drop", err)
	_, err = a.Consumer().Settle(ctx, []*spool.Delivery{mine(valid("c-2", msg{ID: "two"}))}, []error{nil}, spool.Retry{}.Decide)
	lost("settle after the drop", err)
}
