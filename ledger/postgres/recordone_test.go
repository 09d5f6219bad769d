package postgres

import (
	"testing"

	"github.com/spoolq/spool"
)

// TestRecordOneRace: a batch recorded in one statement decides each
// outcome against what processed held when the statement began, so a row
// of one of its msg_ids that another writer commits while the statement
// waits on that key must not be taken for a first delivery, nor leave the
// batch's delivery without an outcome. Here the other writer's row is
// inserted and not yet committed when the batch comes; the statement
// waits on the key, the other commits, the statement fails on the key as
// a whole, and the batch is recorded by a transaction: that delivery a
// duplicate of the other's row (whose content differs), the rest of the
// batch processed, each once.
func TestRecordOneRace(t *testing.T) {
	dsn := freshSchema(t)
	t.Parallel()
	ctx := t.Context()
	const app = "spool-record-one-race"
	db := openAs(t, dsn, app)
	raw := admin(t, dsn)
	other := holdKey(t, raw)
	type recorded struct {
		res []spool.Result
		err error
	}
	done := make(chan recorded, 1)
	go func() {
		res, err := db.Consumer().Record(ctx, []*spool.Delivery{delivery("c-x", "x"), delivery("c-y", "y")}, spool.Work{})
		done <- recorded{res, err}
	}()
	waitOnKey(t, raw, app)
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("record: %v", r.err)
	}
	if r.res[0].Outcome != spool.OutcomeDuplicate || !r.res[0].Conflict {
		t.Errorf("x: %+v, want a duplicate whose content differs", r.res[0])
	}
	if r.res[1].Outcome != spool.OutcomeProcessed {
		t.Errorf("y: %+v, want processed", r.res[1])
	}
	if n := countRows(t, raw, `SELECT COUNT(*) FROM processed WHERE msg_id = 'x' AND claim = 'c-other'`); n != 1 {
		t.Errorf("x's processed row of the other writer: %d, want 1", n)
	}
	if n := countRows(t, raw, `SELECT COUNT(*) FROM processed WHERE msg_id = 'y' AND claim = 'c-y'`); n != 1 {
		t.Errorf("y's processed row: %d, want 1", n)
	}
	if n := countRows(t, raw, `SELECT COUNT(*) FROM deliveries WHERE claim = 'c-x' AND outcome = 'duplicate' AND conflict = 1`); n != 1 {
		t.Errorf("c-x's deliveries row as a conflicting duplicate: %d, want 1", n)
	}
}
