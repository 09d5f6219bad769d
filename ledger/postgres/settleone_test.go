package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool"
)

// TestSettleOneLockOrder: the one-statement settle takes its row locks in
// the order of a settle's transaction (processed, then attempts, then
// reservations), so the two cannot deadlock. Here a transaction in the
// shape of another settle of the same msg_id (a reservation lost while
// the call ran) has inserted its processed row and not committed; the
// statement waits on that key while holding nothing else, the
// transaction then clears the msg_id's attempts without waiting and
// commits, and the settle records the duplicate. With the statement's
// DELETEs run before its INSERT, as the server runs the parts of a WITH
// that nothing reads, the settle held the attempts row while it waited,
// and the server broke the deadlock by failing one of the two.
func TestSettleOneLockOrder(t *testing.T) {
	dsn := freshSchema(t)
	t.Parallel()
	ctx := t.Context()
	const app = "spool-settle-lock-order"
	db := openAs(t, dsn, app)
	decide := spool.Retry{NoJitter: true}.Decide
	first, mine := delivery("c-first", "x"), delivery("c-mine", "x")
	if _, err := db.Consumer().Reserve(ctx, []*spool.Delivery{first}, spool.CallOwner{Session: "s0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Consumer().Settle(ctx, []*spool.Delivery{first}, []error{errors.New("503")}, decide); err != nil {
		t.Fatal(err)
	}
	if res, err := db.Consumer().Reserve(ctx, []*spool.Delivery{mine}, spool.CallOwner{Session: "s1"}); err != nil || res[0].Outcome != spool.OutcomeReserved {
		t.Fatalf("reserve: %v, %v", res, err)
	}
	raw := admin(t, dsn)
	other := holdKey(t, raw)
	type settled struct {
		res []spool.Result
		err error
	}
	done := make(chan settled, 1)
	go func() {
		res, err := db.Consumer().Settle(ctx, []*spool.Delivery{mine}, []error{nil}, decide)
		done <- settled{res, err}
	}()
	// Until the statement waits on the uncommitted key.
	waitOnKey(t, raw, app)
	// The other settle goes on: it must not wait on this one.
	clear, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := other.ExecContext(clear, `DELETE FROM attempts WHERE msg_id = 'x'`); err != nil {
		t.Fatalf("the other transaction clearing x's attempts: %v", err)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	s := <-done
	if s.err != nil {
		t.Fatalf("settle: %v", s.err)
	}
	if s.res[0].Outcome != spool.OutcomeDuplicate || !s.res[0].Conflict {
		t.Errorf("settle: %+v, want a duplicate whose content differs", s.res[0])
	}
	if n := countRows(t, raw, `SELECT COUNT(*) FROM reservations`); n != 0 {
		t.Errorf("reservations after the settle: %d, want 0", n)
	}
}
