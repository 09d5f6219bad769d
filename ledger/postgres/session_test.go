package postgres

import (
	"context"
	"database/sql"
	"testing"

	"github.com/spoolq/spool"
)

// TestHandlerCannotWeakenSession: a handler in the ledger's transaction
// that turns synchronous_commit off and moves search_path for the whole
// session, as a function a --sql script calls could, leaves neither
// behind: the ledger puts both back before its commit (SessionReset), so
// the commit is durable (I3), the ledger's own statements after the
// handler find its tables, and the connection's next transactions run as
// checked at connection. The pool holds one connection, so that the one
// the handler ran on is the one asked afterwards.
func TestHandlerCannotWeakenSession(t *testing.T) {
	t.Parallel()
	for name, weaken := range map[string]string{
		"synchronous_commit": `SELECT set_config('synchronous_commit', 'off', false)`,
		"local":              `SELECT set_config('synchronous_commit', 'off', true)`,
		"search_path":        `SELECT set_config('synchronous_commit', 'off', false), set_config('search_path', 'pg_catalog', false)`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			weakenSession(t, weaken)
		})
	}
}

func weakenSession(t *testing.T, weaken string) {
	db, _ := openFresh(t)
	defer db.Close()
	db.SQL().SetMaxOpenConns(1)
	var before string
	if err := db.SQL().QueryRowContext(t.Context(), "SHOW search_path").Scan(&before); err != nil {
		t.Fatal(err)
	}
	var inTx []string // synchronous_commit after the handler, as the ledger's next statement sees it
	h := spool.HandlerFunc(func(ctx context.Context, tx *sql.Tx, d *spool.Delivery) error {
		if d.Message.MsgID == "B" {
			var sync string
			if err := tx.QueryRowContext(ctx, "SELECT current_setting('synchronous_commit')").Scan(&sync); err != nil {
				return err
			}
			inTx = append(inTx, sync)
		}
		_, err := tx.ExecContext(ctx, weaken)
		return err
	})
	work := spool.Work{Handler: h, Decide: spool.Retry{}.Decide}
	for _, batch := range [][]string{{"A", "B"}, {"C"}} {
		var ds []*spool.Delivery
		for _, id := range batch {
			ds = append(ds, delivery("c-"+id, id))
		}
		res, err := db.Consumer().Record(t.Context(), ds, work)
		if err != nil {
			t.Fatalf("Record %v: %v", batch, err)
		}
		for i, r := range res {
			if r.Outcome != spool.OutcomeProcessed {
				t.Fatalf("Record %s: %+v, want processed", batch[i], r)
			}
		}
		var sync, path string
		if err := db.SQL().QueryRowContext(t.Context(), "SELECT current_setting('synchronous_commit'), current_setting('search_path')").Scan(&sync, &path); err != nil {
			t.Fatal(err)
		}
		if sync != "on" || path != before {
			t.Errorf("after a batch whose handler set them: synchronous_commit %q, search_path %q; want on and %q, the session's own", sync, path, before)
		}
	}
	if len(inTx) != 1 || inTx[0] != "on" {
		t.Errorf("the next message's handler in the same batch saw synchronous_commit %q, want on: reset after each handler", inTx)
	}
	if n := countRows(t, db.SQL(), "SELECT COUNT(*) FROM processed"); n != 3 {
		t.Errorf("processed holds %d rows, want 3", n)
	}
}
