package ledgertest

import (
	"cmp"
	"reflect"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
)

// testDiscard: a discard batch goes pending, staged (with the items found
// gone marked missing), done (with each item's outcome); only finished
// batches count, unfinished ones are listed with their items for a
// resume, a second finish records nothing, and DiscardLog.Of finds a
// message's items by msg_id, or by name among those without one.
func testDiscard(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	at := time.Date(2025, 3, 1, 12, 30, 45, 123456000, time.UTC)
	one := []ledger.DiscardItem{{Idx: 0, File: "x.json", Ino: 10, Reason: "parse"}}
	if _, err := startDiscard(t, db, "", "why", "", at, one); err == nil {
		t.Error("a discard without by: nil error, want one")
	}
	if _, err := startDiscard(t, db, "alice", "  ", "", at, one); err == nil {
		t.Error("a discard without a note: nil error, want one")
	}
	items := []ledger.DiscardItem{
		{Idx: 0, File: "a.json", Ino: 11, MsgID: "a", Reason: "handler", ContentHash: "aa", Size: 3},
		{Idx: 1, File: "bad.json", Ino: 12, Reason: "parse", ContentHash: "bb", Size: 8},
		{Idx: 2, File: "fifo.json", Ino: 13, Reason: "not-regular"},
	}
	id, err := startDiscard(t, db, "alice", "poison from upstream", "/srv/kept", at, items)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := db.Discards().Counts(ctx); err != nil || s != (ledger.DiscardStats{Pending: 1}) {
		t.Errorf("DiscardCounts pending = %+v, %v; want 1 pending", s, err)
	}
	un, err := db.Discards().Unfinished(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := ledger.DiscardBatch{ID: id, By: "alice", Note: "poison from upstream", Created: at, State: ledger.IntentPending,
		ToDir: "/srv/kept", Items: items}
	if len(un) != 1 || !reflect.DeepEqual(un[0], want) {
		t.Fatalf("Discards().Unfinished =\n%+v\nwant\n%+v", un, want)
	}
	if err := db.Discards().Stage(ctx, id, []int{2}); err != nil {
		t.Fatal(err)
	}
	un, err = db.Discards().Unfinished(ctx)
	if err != nil || len(un) != 1 || un[0].State != ledger.IntentStaged || un[0].Items[2].Outcome != ledger.DiscardMissing || un[0].Items[0].Outcome != "" {
		t.Fatalf("after Discards().Stage: %+v, %v", un, err)
	}
	done := []ledger.DiscardItem{items[0], items[1], items[2]}
	done[0].Outcome, done[0].NewName = ledger.DiscardMoved, "a~2.json"
	done[1].Outcome, done[1].NewName = ledger.DiscardMoved, "bad.json"
	done[2].Outcome = ledger.DiscardMissing
	fin := at.Add(time.Second)
	bad := append([]ledger.DiscardItem(nil), done...)
	bad[0].Outcome = "lost"
	if err := db.Discards().Finish(ctx, id, bad, fin); err == nil {
		t.Error("Discards().Finish with an unknown outcome: nil error, want one")
	}
	if err := db.Discards().Finish(ctx, id, done, fin); err != nil {
		t.Fatal(err)
	}
	// Finished already: nothing is recorded again.
	again := append([]ledger.DiscardItem(nil), done...)
	again[0].NewName = "other.json"
	if err := db.Discards().Finish(ctx, id, again, fin.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if un, err := db.Discards().Unfinished(ctx); err != nil || len(un) != 0 {
		t.Errorf("Discards().Unfinished after finish = %+v, %v; want none", un, err)
	}
	if s, err := db.Discards().Counts(ctx); err != nil || s != (ledger.DiscardStats{Files: 2, Batches: 1}) {
		t.Errorf("DiscardCounts = %+v, %v; want 2 files in 1 batch", s, err)
	}
	of, err := db.Discards().Of(ctx, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	wantA := ledger.DiscardBatch{ID: id, By: "alice", Note: "poison from upstream", Created: at, State: ledger.IntentDone,
		ToDir: "/srv/kept", Finished: fin, Items: done[:1]}
	if len(of) != 1 || !reflect.DeepEqual(of[0], wantA) {
		t.Errorf("Discards().Of(a) =\n%+v\nwant\n%+v", of, wantA)
	}
	// By name, only among items without a msg_id: a.json has one.
	of, err = db.Discards().Of(ctx, "nothing", []string{"bad.json", "a.json"})
	if err != nil || len(of) != 1 || len(of[0].Items) != 1 || of[0].Items[0].File != "bad.json" {
		t.Errorf("Discards().Of(bad.json) = %+v, %v; want only bad.json", of, err)
	}
	if of, err := db.Discards().Of(ctx, "", nil); err != nil || len(of) != 0 {
		t.Errorf("Discards().Of() = %+v, %v; want none", of, err)
	}
}

// startDiscard begins a discard batch of items, the whole of a task asked
// and run at once (ledger.Tasks.Start), and returns the batch's id.
func startDiscard(t *testing.T, db *ledger.DB, by, note, toDir string, at time.Time, items []ledger.DiscardItem) (int64, error) {
	files := make([]ledger.TaskFile, len(items))
	for i, it := range items {
		files[i] = ledger.TaskFile{Idx: it.Idx, File: it.File, Ino: it.Ino, ContentHash: it.ContentHash, Size: it.Size, MsgID: it.MsgID, Reason: it.Reason}
	}
	st, err := db.Tasks().Start(t.Context(), ledger.TaskStart{
		Task:  ledger.TaskRecord{Kind: "discard", Files: len(files), By: cmp.Or(by, "-"), Via: ledger.AuditCLI, Note: note},
		Files: files,
		Move:  ledger.TaskMove{Kind: "discard", By: by, Note: note, ToDir: toDir, At: at, Discard: items},
		Audit: ledger.AuditEntry{Actor: cmp.Or(by, "-"), Via: ledger.AuditCLI, Action: "discard"},
	})
	return st.Move, err
}
