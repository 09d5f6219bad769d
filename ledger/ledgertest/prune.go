package ledgertest

import (
	"maps"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
)

// testPruneFiles: Fsck.EachPruneFile marks pruned exactly the files of the
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
		if err := db.Fsck().EachPruneFile(t.Context(), p, func(ino uint64, file string, pruned bool) error {
			out[ino] = pruned
			return nil
		}); err != nil {
			t.Fatalf("Fsck().EachPruneFile: %v", err)
		}
		return out
	}
	before := time.Now().Add(-time.Hour)
	want := map[uint64]bool{oldRow.Ino: true, oldDup.Ino: true, recent.Ino: false}
	if got := files(ledger.Prune{Before: before}); !maps.Equal(got, want) {
		t.Errorf("Fsck().EachPruneFile = %v, want %v", got, want)
	}
	want[oldRow.Ino] = false
	if got := files(ledger.Prune{Before: before, KeepClaims: []string{"c1"}}); !maps.Equal(got, want) {
		t.Errorf("Fsck().EachPruneFile keeping claim c1 = %v, want %v", got, want)
	}
	n, err := db.Fsck().Prune(t.Context(), ledger.Prune{Before: before})
	if err != nil || n != (ledger.Pruned{Processed: 1, Deliveries: 1}) {
		t.Fatalf("Prune = %+v, %v", n, err)
	}
	if got := files(ledger.Prune{Before: before}); !maps.Equal(got, map[uint64]bool{recent.Ino: false}) {
		t.Errorf("Fsck().EachPruneFile after Prune = %v, want only the recent file, kept", got)
	}
}

// testPruneHorizon: a prune that removes rows records its horizon, the
// later of its edge and FilesBefore, never lowered by a later prune; a
// dry run, or a prune that removes nothing, records none; a ledger pruned
// of every row is not Empty.
func testPruneHorizon(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	horizon := func() time.Time {
		t.Helper()
		h, err := db.Fsck().PruneHorizon(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	record(t, db, valid("c1", msg{ID: "m1"}), valid("c2", msg{ID: "m2"}))
	old := time.Now().Add(-48 * time.Hour).UTC().Format(ledger.TimeLayout)
	if _, err := db.SQL().ExecContext(ctx, db.Dialect().Rebind(`UPDATE processed SET processed_at = ? WHERE msg_id = 'm1'`), old); err != nil {
		t.Fatal(err)
	}
	edge := time.Now().Add(-24 * time.Hour).UTC().Truncate(time.Microsecond)
	if _, err := db.Fsck().Prune(ctx, ledger.Prune{Before: edge, DryRun: true}); err != nil || !horizon().IsZero() {
		t.Fatalf("a dry run: %v, horizon %v; want none", err, horizon())
	}
	if _, err := db.Fsck().Prune(ctx, ledger.Prune{Before: edge.Add(-72 * time.Hour)}); err != nil || !horizon().IsZero() {
		t.Fatalf("a prune removing nothing: %v, horizon %v; want none", err, horizon())
	}
	files := edge.Add(90*time.Second + 500*time.Nanosecond)
	if n, err := db.Fsck().Prune(ctx, ledger.Prune{Before: edge, FilesBefore: files}); err != nil || n.Processed != 1 {
		t.Fatalf("Prune = %+v, %v", n, err)
	}
	// Rounded up to the ledger's microseconds: no file changed before it
	// reads as after.
	if got, want := horizon(), files.Truncate(time.Microsecond).Add(time.Microsecond); !got.Equal(want) {
		t.Errorf("horizon %v, want FilesBefore rounded up, %v", got, want)
	}
	if _, err := db.SQL().ExecContext(ctx, db.Dialect().Rebind(`UPDATE processed SET processed_at = ?`), old); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Fsck().Prune(ctx, ledger.Prune{Before: edge.Add(-time.Hour)}); err != nil || n.Processed != 1 {
		t.Fatalf("second Prune = %+v, %v", n, err)
	}
	if got, want := horizon(), files.Truncate(time.Microsecond).Add(time.Microsecond); !got.Equal(want) {
		t.Errorf("horizon %v after a prune with an earlier edge, want it kept at %v", got, want)
	}
	// A file's change time on a microsecond, as a coarse kernel clock
	// gives now and then to every file moved within one tick: the horizon
	// still comes after it, for fsck keeps the files changed before it.
	aligned := files.Truncate(time.Microsecond).Add(time.Second)
	record(t, db, valid("c9", msg{ID: "m9"}))
	if _, err := db.SQL().ExecContext(ctx, db.Dialect().Rebind(`UPDATE processed SET processed_at = ?`), old); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Fsck().Prune(ctx, ledger.Prune{Before: edge, FilesBefore: aligned}); err != nil || n.Processed != 1 {
		t.Fatalf("third Prune = %+v, %v", n, err)
	}
	if got := horizon(); !got.After(aligned) {
		t.Errorf("horizon %v after FilesBefore %v on a microsecond, want later", got, aligned)
	}
	if empty, err := db.Empty(ctx); err != nil || empty {
		t.Errorf("Empty after a prune of every row = %v, %v; want false", empty, err)
	}
}
