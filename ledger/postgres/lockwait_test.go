package postgres

import (
	"database/sql"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
)

// The tests of the one-statement writes put another writer's uncommitted
// row in the statement's way and go on once the statement waits on it.

// openAs opens the ledger of dsn under an application_name of its own, so
// that waitOnKey finds this test's statement and not that of a test
// running beside it on the same server. The test closes it.
func openAs(t *testing.T, dsn, app string) *ledger.DB {
	t.Helper()
	db, err := Open(t.Context(), withParam(t, dsn, "application_name", app))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// holdKey begins a transaction on raw that inserts msg_id x's processed
// row (claim c-other, a content of its own) and does not commit it; the
// test commits it, or it is rolled back when the test ends.
func holdKey(t *testing.T, raw *sql.DB) *sql.Tx {
	t.Helper()
	other, err := raw.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Rollback() })
	if _, err := other.ExecContext(t.Context(), `INSERT INTO processed (msg_id, processed_at, file, content_hash, payload, claim)
		VALUES ('x', '2026-12-03T00:00:00.000000Z', 'x.json', 'other', '{}', 'c-other')`); err != nil {
		t.Fatal(err)
	}
	return other
}

// waitOnKey returns once a one-statement write of the ledger opened as app
// waits on a lock, for at most ten seconds.
func waitOnKey(t *testing.T, raw *sql.DB, app string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for countRows(t, raw, `SELECT COUNT(*) FROM pg_stat_activity
		WHERE wait_event_type = 'Lock' AND query LIKE 'WITH fence AS%' AND application_name = $1`, app) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the statement never waited on the other transaction's key")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
