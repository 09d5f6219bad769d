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
	// A name of its own, so that the wait below is this test's settle and
	// not that of a test running beside it on the same server.
	const app = "spool-settle-lock-order"
	db, err := Open(ctx, withParam(t, dsn, "application_name", app))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	decide := spool.Retry{NoJitter: true}.Decide
	first, mine := delivery("c-first", "x"), delivery("c-mine", "x")
	if _, err := db.Reserve(ctx, []*spool.Delivery{first}, "s0"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Settle(ctx, []*spool.Delivery{first}, []error{errors.New("503")}, decide); err != nil {
		t.Fatal(err)
	}
	if res, err := db.Reserve(ctx, []*spool.Delivery{mine}, "s1"); err != nil || res[0].Outcome != spool.OutcomeReserved {
		t.Fatalf("reserve: %v, %v", res, err)
	}
	raw := admin(t, dsn)
	other, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback() }()
	if _, err := other.ExecContext(ctx, `INSERT INTO processed (msg_id, processed_at, file, content_hash, payload, claim)
		VALUES ('x', '2026-12-03T00:00:00.000000Z', 'x.json', 'other', '{}', 'c-other')`); err != nil {
		t.Fatal(err)
	}
	type settled struct {
		res []spool.Result
		err error
	}
	done := make(chan settled, 1)
	go func() {
		res, err := db.Settle(ctx, []*spool.Delivery{mine}, []error{nil}, decide)
		done <- settled{res, err}
	}()
	// Until the statement waits on the uncommitted key.
	deadline := time.Now().Add(10 * time.Second)
	for countRows(t, raw, `SELECT COUNT(*) FROM pg_stat_activity
		WHERE wait_event_type = 'Lock' AND query LIKE 'WITH fence AS%' AND application_name = $1`, app) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the settle never waited on the other transaction's key")
		}
		time.Sleep(10 * time.Millisecond)
	}
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
