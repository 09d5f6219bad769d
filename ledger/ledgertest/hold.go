package ledgertest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testHolds: a new ledger's queue is not paused and holds nothing; a
// pause and a resume each change the pause once, with their audit row in
// the same transaction (a second pause changes nothing and keeps the
// first one's holder, but is audited); every change of the pause or of
// the held msg_ids grows the version, and a poll with the current
// version reads no set; RecordHeld records only while its msg_id is held;
// held files are listed and forgotten by id.
func testHolds(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	h, err := db.Consumer().Holds(ctx, -1)
	if err != nil || h.Paused != nil || h.MsgIDs == nil || len(h.MsgIDs) != 0 {
		t.Fatalf("Holds of a new ledger = %+v, %v; want not paused, an empty set", h, err)
	}
	v0 := h.Version
	if h, err := db.Consumer().Holds(ctx, v0); err != nil || h.MsgIDs != nil {
		t.Fatalf("Holds at the current version = %+v, %v; want no set", h, err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC)
	alice := ledger.Holder{By: "os:alice", Via: ledger.AuditCLI, Note: "downstream outage", At: at}
	entry := ledger.AuditEntry{Actor: "os:alice", Via: ledger.AuditCLI, Action: "pause", Selection: `{"note":"downstream outage"}`}
	before, changed, err := db.Holding().SetPause(ctx, true, alice, entry)
	if err != nil || !changed || before.Paused {
		t.Fatalf("Holding().SetPause(true) = %+v, %v, %v; want changed from not paused", before, changed, err)
	}
	h, err = db.Consumer().Holds(ctx, v0)
	if err != nil || h.Paused == nil || h.Paused.By != "os:alice" || h.Paused.Note != "downstream outage" || !h.Paused.At.Equal(at) ||
		h.Version == v0 || h.MsgIDs == nil {
		t.Fatalf("Holds after a pause = %+v (%+v), %v; want paused by os:alice, a new version and the set", h, h.Paused, err)
	}
	bob := ledger.Holder{By: "token:bob", Role: "operator", Via: ledger.AuditHTTP, Note: "again"}
	again := ledger.AuditEntry{Actor: "token:bob", Role: "operator", Via: ledger.AuditHTTP, Action: "pause"}
	before, changed, err = db.Holding().SetPause(ctx, true, bob, again)
	if err != nil || changed || !before.Paused || before.By != "os:alice" {
		t.Fatalf("a second Holding().SetPause(true) = %+v, %v, %v; want unchanged, paused by os:alice", before, changed, err)
	}
	if p, err := db.Holding().PauseState(ctx); err != nil || !p.Paused || p.By != "os:alice" || p.Note != "downstream outage" || p.Version != h.Version {
		t.Fatalf("PauseState after a second pause = %+v, %v; want the first pause, the version unchanged", p, err)
	}
	resume := ledger.AuditEntry{Actor: "token:bob", Role: "operator", Via: ledger.AuditHTTP, Action: "resume"}
	if before, changed, err := db.Holding().SetPause(ctx, false, bob, resume); err != nil || !changed || !before.Paused {
		t.Fatalf("Holding().SetPause(false) = %+v, %v, %v", before, changed, err)
	}
	p, err := db.Holding().PauseState(ctx)
	if err != nil || p.Paused || p.By != "token:bob" || p.Role != "operator" || p.Version <= h.Version {
		t.Fatalf("PauseState after a resume = %+v, %v; want not paused, resumed by token:bob", p, err)
	}
	rows, err := db.Audit().List(ctx, ledger.AuditQuery{})
	if err != nil || len(rows) != 3 {
		t.Fatalf("audit rows = %+v, %v; want 3 (pause, pause again, resume)", rows, err)
	}
	for i, want := range []string{"paused", "already paused: nothing changed", "resumed"} {
		if r := rows[i]; r.Outcome != ledger.AuditOK || r.Detail != want || r.Ended.IsZero() {
			t.Errorf("audit row %d = %+v; want ok, %q", i, r, want)
		}
	}
	if !rows[0].At.Equal(at) {
		t.Errorf("the pause's audit row is at %v, want the holder's %v", rows[0].At, at)
	}

	// Held msg_ids.
	v := p.Version
	added, err := db.Holding().HoldMsgIDs(ctx, []string{"m-1", "m-2"}, alice)
	if err != nil || !slices.Equal(added, []string{"m-1", "m-2"}) {
		t.Fatalf("Holding().HoldMsgIDs = %v, %v", added, err)
	}
	if added, err := db.Holding().HoldMsgIDs(ctx, []string{"m-2", "m-3"}, bob); err != nil || !slices.Equal(added, []string{"m-3"}) {
		t.Fatalf("Holding().HoldMsgIDs of one held already = %v, %v; want [m-3]", added, err)
	}
	if _, err := db.Holding().HoldMsgIDs(ctx, []string{" "}, bob); err == nil {
		t.Error("Holding().HoldMsgIDs of a blank key: nil error")
	}
	h, err = db.Consumer().Holds(ctx, v)
	if err != nil || h.Version <= v || len(h.MsgIDs) != 3 || h.Paused != nil {
		t.Fatalf("Holds after holding 3 msg_ids = %+v, %v", h, err)
	}
	ids, err := db.Holding().HeldIDs(ctx)
	if err != nil || len(ids) != 3 || ids[1].MsgID != "m-2" || ids[1].By != "os:alice" || ids[2].By != "token:bob" || ids[2].Role != "operator" {
		t.Fatalf("Holding().HeldIDs = %+v, %v; want m-2 held by its first holder", ids, err)
	}

	// A consumer sets deliveries aside while their msg_id is held.
	ok, err := db.Consumer().RecordHeld(ctx, spool.HeldAside{File: "a~2.json", Ino: 77, Origin: "a.json", MsgID: "m-1", Consumer: "s1"})
	if err != nil || !ok {
		t.Fatalf("RecordHeld of a held msg_id = %v, %v", ok, err)
	}
	if ok, err := db.Consumer().RecordHeld(ctx, spool.HeldAside{File: "z.json", Ino: 78, Origin: "z.json", MsgID: "other"}); err != nil || ok {
		t.Fatalf("RecordHeld of a msg_id not held = %v, %v; want false", ok, err)
	}
	id, err := db.Holding().RecordHeldFile(ctx, ledger.HeldFile{File: "b.json", Ino: 79, Origin: "b.json", Cause: ledger.HeldByFile, Holder: bob})
	if err != nil || id == 0 {
		t.Fatalf("Holding().RecordHeldFile = %d, %v", id, err)
	}
	files, err := db.Holding().HeldFiles(ctx)
	if err != nil || len(files) != 2 {
		t.Fatalf("Holding().HeldFiles = %+v, %v; want 2", files, err)
	}
	if f := files[0]; f.File != "a~2.json" || f.Ino != 77 || f.Origin != "a.json" || f.MsgID != "m-1" || f.Cause != ledger.HeldByMsgID ||
		f.By != "os:alice" || f.Note != "downstream outage" {
		t.Errorf("the file set aside = %+v; want its msg_id hold's holder and note", f)
	}
	if f := files[1]; f.ID != id || f.MsgID != "" || f.Cause != ledger.HeldByFile || f.By != "token:bob" || f.Via != ledger.AuditHTTP {
		t.Errorf("the file held by name = %+v", f)
	}
	removed, err := db.Holding().ReleaseMsgIDs(ctx, []string{"m-1", "nope"})
	if err != nil || !slices.Equal(removed, []string{"m-1"}) {
		t.Fatalf("Holding().ReleaseMsgIDs = %v, %v; want [m-1]", removed, err)
	}
	if ok, err := db.Consumer().RecordHeld(ctx, spool.HeldAside{File: "a~3.json", Ino: 80, Origin: "a.json", MsgID: "m-1"}); err != nil || ok {
		t.Fatalf("RecordHeld after the release = %v, %v; want false", ok, err)
	}
	if err := db.Holding().ForgetHeldFiles(ctx, []int64{files[0].ID, files[1].ID}); err != nil {
		t.Fatal(err)
	}
	if files, err := db.Holding().HeldFiles(ctx); err != nil || len(files) != 0 {
		t.Fatalf("Holding().HeldFiles after Holding().ForgetHeldFiles = %+v, %v", files, err)
	}
}

// testHoldRace: of two handles pausing at once exactly one changes the
// pause (and neither deadlocks); a consumer recording a file set aside
// while an operator releases its msg_id either records it before the
// release commits, and the release then sees the record, or finds the
// msg_id released and records nothing.
func testHoldRace(t *testing.T, a, b *ledger.DB) {
	ctx := t.Context()
	for round := range 10 {
		var wg sync.WaitGroup
		changed := make([]bool, 2)
		for i, db := range []*ledger.DB{a, b} {
			wg.Go(func() {
				h := ledger.Holder{By: "os:op", Via: ledger.AuditCLI}
				_, c, err := db.Holding().SetPause(ctx, round%2 == 0, h, ledger.AuditEntry{Actor: "os:op", Via: ledger.AuditCLI, Action: "pause"})
				if err != nil {
					t.Errorf("round %d: Holding().SetPause: %v", round, err)
				}
				changed[i] = c
			})
		}
		wg.Wait()
		if changed[0] == changed[1] {
			t.Fatalf("round %d: changed %v; want exactly one change", round, changed)
		}
	}
	holder := ledger.Holder{By: "os:op", Via: ledger.AuditCLI}
	for round := range 20 {
		id := "race-" + string(rune('a'+round))
		if _, err := a.Holding().HoldMsgIDs(ctx, []string{id}, holder); err != nil {
			t.Fatal(err)
		}
		var (
			wg       sync.WaitGroup
			recorded bool
			removed  []string
			seen     int // records of id the releaser found after its release
		)
		wg.Go(func() {
			ok, err := b.Consumer().RecordHeld(ctx, spool.HeldAside{File: id + ".json", Ino: 1, Origin: id + ".json", MsgID: id})
			if err != nil {
				t.Errorf("RecordHeld: %v", err)
			}
			recorded = ok
		})
		wg.Go(func() {
			// As package hold releases: the hold, then the files it finds.
			var err error
			if removed, err = a.Holding().ReleaseMsgIDs(ctx, []string{id}); err != nil {
				t.Errorf("Holding().ReleaseMsgIDs: %v", err)
			}
			files, err := a.Holding().HeldFiles(ctx)
			if err != nil {
				t.Errorf("Holding().HeldFiles: %v", err)
			}
			for _, f := range files {
				if f.MsgID == id {
					seen++
				}
			}
		})
		wg.Wait()
		if len(removed) != 1 {
			t.Fatalf("%s: released %v", id, removed)
		}
		if recorded != (seen == 1) {
			t.Fatalf("%s: RecordHeld said %v, and the release then found %d records: a file set aside would stay held", id, recorded, seen)
		}
	}
}
