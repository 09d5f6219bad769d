package ledgertest

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/spoolq/spool"
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

// testPruneBatchProgress: Prune forgets the progress of the batch files
// whose progress last moved before its edge, but that of a file whose
// inode KeepInodes holds, and a recent one; a dry run counts the same and
// removes nothing; EachPruneFile tells the batch files as Prune treats
// them. More rows than a page, so that Prune goes through them a page at
// a time.
func testPruneBatchProgress(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	const files = 1203 // more than two pages of pruneBatchPage
	for i := range files {
		p := spool.BatchProgress{File: fmt.Sprintf("f%04d.csv:%d:10:20", i, 1000+i), Batch: fmt.Sprintf("s:%d:1", i), Position: "1:10:2"}
		if _, err := db.Consumer().RecordBatch(ctx, nil, spool.Work{}, p); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-48 * time.Hour).UTC().Format(ledger.TimeLayout)
	// f0000 stays recent; f0001 is old but its file still readable.
	if _, err := db.SQL().ExecContext(ctx, db.Dialect().Rebind(`UPDATE spool_batch_progress SET at = ? WHERE file <> 'f0000.csv:1000:10:20'`), old); err != nil {
		t.Fatal(err)
	}
	p := ledger.Prune{Before: time.Now().Add(-time.Hour), KeepInodes: map[uint64]bool{1001: true}}
	pruned := map[uint64]bool{}
	if err := db.Fsck().EachPruneFile(ctx, p, func(ino uint64, file string, gone bool) error {
		if gone {
			pruned[ino] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(pruned) != files-2 || pruned[1000] || pruned[1001] || !pruned[1002] {
		t.Errorf("EachPruneFile marks %d batch files pruned (1000: %v, 1001: %v, 1002: %v), want %d, not 1000 nor 1001",
			len(pruned), pruned[1000], pruned[1001], pruned[1002], files-2)
	}
	dry := p
	dry.DryRun = true
	if n, err := db.Fsck().Prune(ctx, dry); err != nil || n != (ledger.Pruned{BatchFiles: files - 2}) {
		t.Fatalf("Prune dry run = %+v, %v; want %d batch files", n, err, files-2)
	}
	if n, err := db.Fsck().Prune(ctx, p); err != nil || n != (ledger.Pruned{BatchFiles: files - 2}) {
		t.Fatalf("Prune = %+v, %v; want %d batch files", n, err, files-2)
	}
	for i := range files {
		_, ok, err := db.Consumer().BatchProgress(ctx, fmt.Sprintf("f%04d.csv:%d:10:20", i, 1000+i))
		if err != nil || ok != (i < 2) {
			t.Fatalf("BatchProgress of file %d after Prune: %v, %v; want kept %v", i, ok, err, i < 2)
		}
	}
	if h, err := db.Fsck().PruneHorizon(ctx); err != nil || h.IsZero() {
		t.Errorf("PruneHorizon after a prune of batch progress = %v, %v; want one", h, err)
	}
}
