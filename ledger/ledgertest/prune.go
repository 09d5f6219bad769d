package ledgertest

import (
	"maps"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
)

// testPruneFiles: EachPruneFile marks pruned exactly the files of the
// rows Prune then removes (an old processed row, an old duplicate), not
// a recent row's file nor one of a claim kept in flight.
func testPruneFiles(t *testing.T, db *ledger.DB) {
	oldRow, oldDup, recent := valid("c1", msg{ID: "m1"}), valid("c2", msg{ID: "m1"}), valid("c3", msg{ID: "m2"})
	record(t, db, oldRow, oldDup, recent)
	old := time.Now().Add(-48 * time.Hour).UTC().Format(ledger.TimeLayout)
	for _, q := range []string{
		`UPDATE processed SET processed_at = ? WHERE msg_id = 'm1'`,
		`UPDATE deliveries SET at = ? WHERE claim = 'c2'`,
	} {
		if _, err := db.SQL().ExecContext(t.Context(), db.Dialect().Rebind(q), old); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	files := func(p ledger.Prune) map[uint64]bool {
		t.Helper()
		out := map[uint64]bool{}
		if err := db.EachPruneFile(t.Context(), p, func(ino uint64, file string, pruned bool) error {
			out[ino] = pruned
			return nil
		}); err != nil {
			t.Fatalf("EachPruneFile: %v", err)
		}
		return out
	}
	before := time.Now().Add(-time.Hour)
	want := map[uint64]bool{oldRow.Ino: true, oldDup.Ino: true, recent.Ino: false}
	if got := files(ledger.Prune{Before: before}); !maps.Equal(got, want) {
		t.Errorf("EachPruneFile = %v, want %v", got, want)
	}
	want[oldRow.Ino] = false
	if got := files(ledger.Prune{Before: before, KeepClaims: []string{"c1"}}); !maps.Equal(got, want) {
		t.Errorf("EachPruneFile keeping claim c1 = %v, want %v", got, want)
	}
	n, err := db.Prune(t.Context(), ledger.Prune{Before: before})
	if err != nil || n != (ledger.Pruned{Processed: 1, Deliveries: 1}) {
		t.Fatalf("Prune = %+v, %v", n, err)
	}
	if got := files(ledger.Prune{Before: before}); !maps.Equal(got, map[uint64]bool{recent.Ino: false}) {
		t.Errorf("EachPruneFile after Prune = %v, want only the recent file, kept", got)
	}
}
