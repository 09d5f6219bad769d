package bench

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/spoolq/spool/internal/sample"
	"github.com/spoolq/spool/ledger/sqlite"
)

// TestFloorLedger: the ledger floor counts every generated record and
// leaves exactly one processed row per distinct valid record in its
// ledger, over several transactions and a last short one: a floor that
// skipped work would look fast for nothing.
func TestFloorLedger(t *testing.T) {
	dir := t.TempDir()
	gen := sample.Options{DupFrac: 0.1, PoisonFrac: 0.05, Seed: 3}
	const n = 2*floorLedgerTx + 77
	run, err := floorLedger(context.Background(), dir, n, gen, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if run.N != n || run.Elapsed <= 0 || run.Name != "floor (ledger)" {
		t.Fatalf("run %+v, want %d records and a time", run, n)
	}
	exp, err := sample.Generate(n, gen, func(sample.File) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows int
	if err := db.SQL().QueryRow(`SELECT COUNT(*) FROM processed`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != exp.Unique || exp.Unique == 0 || exp.DeadLetters == 0 {
		t.Fatalf("%d processed rows, want %d (of %d records, %d poison)", rows, exp.Unique, n, exp.DeadLetters)
	}
}
