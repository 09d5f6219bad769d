package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
)

// Scratch makes a namespace of the test's own for a ledger where dsn
// points (ledger.Scratch: a schema, a database, a directory) and returns
// the DSN of a ledger in it, which the first ledger.Open creates. The
// namespace is removed when the test ends, after the ledgers on it were
// closed by cleanups registered later (cleanups run last-in first-out). The
// backend of dsn must be registered (its package imported).
func Scratch(t testing.TB, dsn string) string {
	t.Helper()
	scratch, drop, err := ledger.Scratch(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := drop(ctx); err != nil {
			t.Error(err)
		}
	})
	return scratch
}
