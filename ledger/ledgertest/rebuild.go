package ledgertest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// testRebuild: a ledger marked as being rebuilt (ledger.BeginRebuild) is
// bound to its queue before its first row, refused by Bind in every mode
// with ErrRebuilding, half-filled or not, until Fsck.EndRebuild; BeginRebuild
// again on a marked ledger keeps the mark (a killed rebuild resumed).
func testRebuild(t *testing.T, db *ledger.DB) {
	dir := filepath.Join(t.TempDir(), "q")
	if err := queue.Init(dir); err != nil {
		t.Fatal(err)
	}
	d, err := queue.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// History: a file in done/ that the ledger has no record of.
	if err := os.WriteFile(filepath.Join(dir, "done", "a.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	id, err := ledger.BeginRebuild(ctx, db, d, "test")
	if err != nil {
		t.Fatal(err)
	}
	if lid, err := db.QueueID(ctx); err != nil || lid != id {
		t.Fatalf("after BeginRebuild the ledger's queue is %q (%v), want %q", lid, err, id)
	}
	mark, err := db.Fsck().Rebuilding(ctx)
	if err != nil || mark == "" {
		t.Fatalf("Rebuilding = %q, %v after BeginRebuild", mark, err)
	}
	// BindNew first: refused, it must not mark the ledger started empty
	// on purpose either.
	modes := []struct {
		name string
		mode ledger.BindMode
	}{{"new", ledger.BindNew}, {"check", ledger.BindCheck}, {"write", ledger.BindWrite}}
	refused := func(when string) {
		t.Helper()
		for _, m := range modes {
			if _, err := ledger.Bind(ctx, db, d, m.mode); !errors.Is(err, ledger.ErrRebuilding) {
				t.Errorf("%s: Bind (%s) = %v, want ErrRebuilding", when, m.name, err)
			}
		}
	}
	refused("empty")
	if err := db.Fsck().EndRebuild(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Bind(ctx, db, d, ledger.BindWrite); !errors.Is(err, ledger.ErrNewLedger) {
		t.Errorf("an empty ledger unmarked after refused Binds: BindWrite = %v, want ErrNewLedger", err)
	}
	if _, err := ledger.BeginRebuild(ctx, db, d, "test"); err != nil {
		t.Fatal(err)
	}
	if mark, err = db.Fsck().Rebuilding(ctx); err != nil || mark == "" {
		t.Fatalf("Rebuilding = %q, %v after BeginRebuild", mark, err)
	}
	record(t, db, valid("c1", msg{ID: "a", OrderNo: "o", Seq: 1, Amount: "1"}))
	refused("half-filled")
	if _, err := ledger.BeginRebuild(ctx, db, d, "again"); err != nil {
		t.Fatal(err)
	}
	if again, _ := db.Fsck().Rebuilding(ctx); again != mark {
		t.Errorf("a resumed rebuild changed the mark from %q to %q", mark, again)
	}
	refused("resumed")
	if err := db.Fsck().EndRebuild(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range modes {
		if got, err := ledger.Bind(ctx, db, d, m.mode); err != nil || got != id {
			t.Errorf("after Fsck().EndRebuild: Bind (%s) = %q, %v; want %q", m.name, got, err, id)
		}
	}
}
