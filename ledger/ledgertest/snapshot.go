package ledgertest

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testSnapshot: an engine that copies a ledger into a file (spool backup)
// writes a copy that opens as a ledger, passes the engine's integrity
// check and holds the rows; one that cannot says so with a
// *NoSnapshotError naming its own tool, and writes nothing.
func testSnapshot(t *testing.T, db *ledger.DB) {
	record(t, db, valid("c1", msg{ID: "m1"}), valid("c2", msg{ID: "m1"}),
		rejected("c3", "bad.json", 7, spool.ReasonParse, "", "not json"))
	want := ledger.Rows{Processed: 1, Deliveries: 2}
	if got, err := db.Backup().CountRows(t.Context()); err != nil || got != want {
		t.Fatalf("Backup().CountRows = %+v, %v; want %+v", got, err, want)
	}
	path := filepath.Join(t.TempDir(), "copy.db")
	var nse *ledger.NoSnapshotError
	if err := db.Backup().CanSnapshot(); err != nil {
		if !errors.As(err, &nse) || nse.Tool == "" {
			t.Fatalf("Backup().CanSnapshot = %v, want nil or a *NoSnapshotError naming a tool", err)
		}
		if err := db.Backup().SnapshotInto(t.Context(), path); !errors.As(err, &nse) {
			t.Errorf("Backup().SnapshotInto on an engine that cannot = %v, want a *NoSnapshotError", err)
		}
		if err := db.Backup().CheckIntegrity(t.Context()); !errors.As(err, &nse) {
			t.Errorf("Backup().CheckIntegrity on an engine that cannot = %v, want a *NoSnapshotError", err)
		}
		return
	}
	if err := db.Backup().CheckIntegrity(t.Context()); err != nil {
		t.Fatalf("Backup().CheckIntegrity of the live ledger: %v", err)
	}
	if err := db.Backup().SnapshotInto(t.Context(), path); err != nil {
		t.Fatalf("Backup().SnapshotInto: %v", err)
	}
	c, err := ledger.Open(t.Context(), ledger.FileScheme+":"+path, ledger.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatalf("open the copy: %v", err)
	}
	defer c.Close()
	if err := c.Backup().CheckIntegrity(t.Context()); err != nil {
		t.Errorf("Backup().CheckIntegrity of the copy: %v", err)
	}
	if got, err := c.Backup().CountRows(t.Context()); err != nil || got != want {
		t.Errorf("the copy's Backup().CountRows = %+v, %v; want %+v", got, err, want)
	}
	if err := db.Backup().SnapshotInto(t.Context(), path); err == nil {
		t.Errorf("Backup().SnapshotInto over a file that holds a database succeeded")
	}
}
