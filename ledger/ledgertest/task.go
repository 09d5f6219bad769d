package ledgertest

import (
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
)

// testTasks: a task is created with its file set, moves through its
// states only from the states a transition names, begins each chunk
// once with its intent or batch (a chunk of a task no longer running, or
// at another cursor, commits nothing), and finishing a chunk counts its
// files in the task in the same transaction, and ends it done when it was
// the last.
func testTasks(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	files := []ledger.TaskFile{
		{Idx: 0, File: "a.json", Ino: 11, ContentHash: "aa", Size: 3, MsgID: "a", Reason: "handler"},
		{Idx: 1, File: "b.json", Ino: 12, ContentHash: "bb", Size: 4, Reason: "parse"},
		{Idx: 2, File: "c.json", Ino: 13, ContentHash: "cc", Size: 5, MsgID: "c", Reason: "handler"},
	}
	rec := ledger.TaskRecord{Kind: "replay", State: ledger.TaskWaiting, Request: `{"kind":"replay"}`, Files: 3, Digest: "d1",
		Skipped: 1, By: "token:alice", ByOS: "alice", Role: "operator", Via: ledger.AuditHTTP, Note: "fixed", Created: at}
	if _, err := db.Tasks().Create(ctx, ledger.TaskRecord{Kind: "replay", State: ledger.TaskRunning, By: "a", Via: "cli"}, nil); err == nil {
		t.Error("Tasks().Create running: nil error")
	}
	id, err := db.Tasks().Create(ctx, rec, files)
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.Tasks().Get(ctx, id)
	if err != nil || got.State != ledger.TaskWaiting || got.Files != 3 || got.Skipped != 1 || got.By != "token:alice" || got.ByOS != "alice" || got.Role != "operator" ||
		!got.Created.Equal(at) || got.Request != rec.Request || got.Digest != "d1" {
		t.Fatalf("Task = %+v, %v", got, err)
	}
	if _, err := db.Tasks().Get(ctx, id+100); !errors.Is(err, ledger.ErrTaskNotFound) {
		t.Errorf("Task(unknown) = %v", err)
	}
	if fs, err := db.Tasks().Files(ctx, id, 1, 3); err != nil || len(fs) != 2 || fs[0] != files[1] || fs[1] != files[2] {
		t.Errorf("Tasks().Files = %+v, %v", fs, err)
	}
	if err := db.Tasks().Move(ctx, id, ledger.TaskTransition{From: []string{ledger.TaskApproved}, To: ledger.TaskRunning}); !errors.Is(err, ledger.ErrTaskState) {
		t.Errorf("running from approved while waiting: %v", err)
	}
	if err := db.Tasks().Move(ctx, id, ledger.TaskTransition{From: []string{ledger.TaskWaiting}, To: ledger.TaskApproved, By: "bob", At: at.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	chunk := ledger.TaskChunk{Task: id, From: 0, To: 2, Changed: map[int]string{1: "its body changed"}}
	move := ledger.TaskMove{Kind: "replay", By: "alice", At: at, Replay: []ledger.ReplayItem{{Idx: 0, File: "a.json", Ino: 11}}}
	if _, err := db.Tasks().BeginChunk(ctx, chunk, move); !errors.Is(err, ledger.ErrTaskState) {
		t.Errorf("chunk of a task not running: %v", err)
	}
	if err := db.Tasks().Move(ctx, id, ledger.TaskTransition{From: []string{ledger.TaskApproved}, To: ledger.TaskRunning}); err != nil {
		t.Fatal(err)
	}
	iid, err := db.Tasks().BeginChunk(ctx, chunk, move)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Tasks().BeginChunk(ctx, chunk, move); !errors.Is(err, ledger.ErrTaskState) {
		t.Errorf("the same chunk twice: %v", err)
	}
	if un, err := db.Replays().Unfinished(ctx); err != nil || len(un) != 1 || un[0].ID != iid {
		t.Errorf("Replays().Unfinished = %+v, %v; want the chunk's intent", un, err)
	}
	if err := db.Replays().Finish(ctx, iid, []ledger.Replay{{File: "a.json", NewName: "a.json", Ino: 11, By: "alice", At: at}}, at); err != nil {
		t.Fatal(err)
	}
	if un, err := db.Replays().Unfinished(ctx); err != nil || len(un) != 0 {
		t.Errorf("Replays().Unfinished = %+v, %v; want none", un, err)
	}
	got, err = db.Tasks().Get(ctx, id)
	if err != nil || got.Next != 2 || got.Done != 1 || got.Missing != 0 || got.Changed != 1 || got.ApprovedBy != "bob" {
		t.Fatalf("Task after a chunk = %+v, %v", got, err)
	}
	if fs, err := db.Tasks().Files(ctx, id, 1, 2); err != nil || len(fs) != 1 || fs[0].ChangedWhy != "its body changed" {
		t.Errorf("Tasks().Files = %+v, %v", fs, err)
	}
	// A discard chunk whose file was gone counts it missing.
	bid, err := db.Tasks().BeginChunk(ctx, ledger.TaskChunk{Task: id, From: 2, To: 3}, ledger.TaskMove{Kind: "discard", By: "alice", Note: "n", At: at,
		Discard: []ledger.DiscardItem{{Idx: 2, File: "c.json", Ino: 13, Reason: "handler", Size: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Discards().Finish(ctx, bid, []ledger.DiscardItem{{Idx: 2, File: "c.json", Outcome: ledger.DiscardMissing}}, at); err != nil {
		t.Fatal(err)
	}
	// Its last chunk finished, the task is done, in the same transaction.
	if err := db.Tasks().Move(ctx, id, ledger.TaskTransition{From: []string{ledger.TaskRunning}, To: ledger.TaskDone}); !errors.Is(err, ledger.ErrTaskState) {
		t.Errorf("done after its last chunk finished: Tasks().Move = %v, want ErrTaskState", err)
	}
	got, err = db.Tasks().Get(ctx, id)
	if err != nil || got.State != ledger.TaskDone || got.Next != 3 || got.Done != 1 || got.Missing != 1 || got.Ended.IsZero() {
		t.Fatalf("Task done = %+v, %v", got, err)
	}
	if err := db.Tasks().Move(ctx, id, ledger.TaskTransition{From: []string{ledger.TaskWaiting, ledger.TaskApproved, ledger.TaskRunning}, To: ledger.TaskCancelled}); !errors.Is(err, ledger.ErrTaskState) {
		t.Errorf("cancel of a done task: %v", err)
	}
	id2, err := db.Tasks().Create(ctx, ledger.TaskRecord{Kind: "discard", State: ledger.TaskApproved, Files: 0, Digest: "d2", By: "carol", Via: ledger.AuditCLI, Created: at}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ts, err := db.Tasks().List(ctx, ledger.TaskQuery{}); err != nil || len(ts) != 2 || ts[0].ID != id2 || ts[1].ID != id {
		t.Errorf("Tasks = %+v, %v", ts, err)
	}
	if ts, err := db.Tasks().List(ctx, ledger.TaskQuery{States: []string{ledger.TaskApproved, ledger.TaskWaiting}}); err != nil || len(ts) != 1 || ts[0].ID != id2 {
		t.Errorf("Tasks(approved) = %+v, %v", ts, err)
	}
	if ts, err := db.Tasks().List(ctx, ledger.TaskQuery{Before: id2, Limit: 1}); err != nil || len(ts) != 1 || ts[0].ID != id {
		t.Errorf("Tasks(before) = %+v, %v", ts, err)
	}
}

// testStartTasks: a task asked and run at once is recorded with its first
// move and its audit row (started, with the task's id) in one
// transaction, running with the move's files begun; a move of the whole
// set leaves no chunk for another run, and finishing it ends the task
// done with its counts; a first move of more files than the set, or of
// none, records nothing; a cancelled task whose last chunk finishes
// stays cancelled.
func testStartTasks(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	rec := ledger.TaskRecord{Kind: "replay", Request: `{"kind":"replay","selection":{"all":true}}`, Files: 2, Digest: "d1", Skipped: 1,
		By: "alice", Via: ledger.AuditCLI, Note: "fixed"}
	files := []ledger.TaskFile{{Idx: 0, File: "a.json", Ino: 11, MsgID: "a"}, {Idx: 1, File: "b.json", Ino: 12}}
	items := []ledger.ReplayItem{{Idx: 0, File: "a.json", Ino: 11}, {Idx: 1, File: "b.json", Ino: 12}}
	audit := ledger.AuditEntry{Actor: "alice", Via: ledger.AuditCLI, Action: "replay", Selection: `{"all":true}`, Host: "h", PID: 7}
	move := ledger.TaskMove{Kind: "replay", By: "alice", Note: "fixed", At: at, Replay: items}
	for _, bad := range []ledger.TaskStart{
		{Task: rec, Files: files[:1], Move: move, Audit: audit},
		{Task: rec, Files: files, Move: ledger.TaskMove{Kind: "replay", By: "alice", At: at}, Audit: audit},
		{Task: rec, Files: files, Move: ledger.TaskMove{Kind: "discard", By: "alice", At: at, Replay: items}, Audit: audit},
		{Task: rec, Files: files, Move: move},
	} {
		if _, err := db.Tasks().Start(ctx, bad); err == nil {
			t.Errorf("Tasks().Start(%+v): nil error", bad)
		}
	}
	if ts, err := db.Tasks().List(ctx, ledger.TaskQuery{}); err != nil || len(ts) != 0 {
		t.Fatalf("refused starts recorded tasks: %+v, %v", ts, err)
	}
	st, err := db.Tasks().Start(ctx, ledger.TaskStart{Task: rec, Files: files, Move: move, Audit: audit})
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.Tasks().Get(ctx, st.Task)
	if err != nil || got.State != ledger.TaskRunning || got.Next != 2 || got.Files != 2 || got.Skipped != 1 || got.By != "alice" ||
		got.Via != ledger.AuditCLI || !got.Created.Equal(at) || got.Request != rec.Request || got.Done != 0 {
		t.Fatalf("Task after Tasks().Start = %+v, %v", got, err)
	}
	if un, err := db.Replays().Unfinished(ctx); err != nil || len(un) != 1 || un[0].ID != st.Move || len(un[0].Items) != 2 {
		t.Fatalf("Replays().Unfinished = %+v, %v", un, err)
	}
	rows, err := db.Audit().List(ctx, ledger.AuditQuery{Action: "replay"})
	if err != nil || len(rows) != 1 || rows[0].ID != st.Audit || rows[0].Task != st.Task || rows[0].Outcome != ledger.AuditStarted || rows[0].PID != 7 {
		t.Fatalf("audit after Tasks().Start = %+v, %v", rows, err)
	}
	// No run can take a chunk of it: its cursor is past its set.
	if _, err := db.Tasks().BeginChunk(ctx, ledger.TaskChunk{Task: st.Task, From: 0, To: 1}, ledger.TaskMove{Kind: "replay", By: "bob", At: at, Replay: items[:1]}); !errors.Is(err, ledger.ErrTaskState) {
		t.Errorf("a chunk of a task begun whole: %v, want ErrTaskState", err)
	}
	if err := db.Replays().Finish(ctx, st.Move, []ledger.Replay{{File: "a.json", NewName: "a.json", Ino: 11, By: "alice", At: at}}, at.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err = db.Tasks().Get(ctx, st.Task)
	if err != nil || got.State != ledger.TaskDone || got.Done != 1 || got.Missing != 1 || !got.Ended.Equal(at.Add(time.Second)) {
		t.Fatalf("Task after its move finished = %+v, %v", got, err)
	}

	// A discard of two files at a rate: its first move is one file, and the
	// second chunk is a run's.
	drec := ledger.TaskRecord{Kind: "discard", Files: 2, Digest: "d2", By: "bob", Via: ledger.AuditCLI, Note: "spam"}
	dfiles := []ledger.TaskFile{{Idx: 0, File: "c.json", Ino: 13, ContentHash: "cc", Size: 2}, {Idx: 1, File: "e.json", Ino: 15, ContentHash: "ee", Size: 2}}
	daudit := audit
	daudit.Action = "discard"
	dst, err := db.Tasks().Start(ctx, ledger.TaskStart{Task: drec, Files: dfiles, Audit: daudit, Move: ledger.TaskMove{Kind: "discard", By: "bob", Note: "spam", At: at,
		Discard: []ledger.DiscardItem{{Idx: 0, File: "c.json", Ino: 13, ContentHash: "cc", Size: 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := db.Tasks().Get(ctx, dst.Task); err != nil || got.State != ledger.TaskRunning || got.Kind != "discard" || got.Next != 1 {
		t.Fatalf("Task after Tasks().Start = %+v, %v", got, err)
	}
	if err := db.Discards().Finish(ctx, dst.Move, []ledger.DiscardItem{{Idx: 0, File: "c.json", Outcome: ledger.DiscardDeleted}}, at); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Tasks().Get(ctx, dst.Task); err != nil || got.State != ledger.TaskRunning || got.Done != 1 {
		t.Fatalf("Task after its first move = %+v, %v, want running, a chunk left", got, err)
	}
	bid, err := db.Tasks().BeginChunk(ctx, ledger.TaskChunk{Task: dst.Task, From: 1, To: 2}, ledger.TaskMove{Kind: "discard", By: "bob", Note: "spam", At: at,
		Discard: []ledger.DiscardItem{{Idx: 1, File: "e.json", Ino: 15, ContentHash: "ee", Size: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Discards().Finish(ctx, bid, []ledger.DiscardItem{{Idx: 1, File: "e.json", Outcome: ledger.DiscardDeleted}}, at); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Tasks().Get(ctx, dst.Task); err != nil || got.State != ledger.TaskDone || got.Done != 2 || got.Missing != 0 {
		t.Fatalf("Task after its discard finished = %+v, %v", got, err)
	}

	// A task cancelled while its last chunk was under way stays cancelled;
	// one that failed while its last move was under way ends done when
	// another run finishes the move.
	for _, end := range []string{ledger.TaskCancelled, ledger.TaskFailed} {
		cid, err := db.Tasks().Create(ctx, ledger.TaskRecord{Kind: "replay", State: ledger.TaskApproved, Files: 1, By: "carol", Via: ledger.AuditCLI, Created: at},
			[]ledger.TaskFile{{Idx: 0, File: "d.json", Ino: 14}})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Tasks().Move(ctx, cid, ledger.TaskTransition{From: []string{ledger.TaskApproved}, To: ledger.TaskRunning}); err != nil {
			t.Fatal(err)
		}
		ciid, err := db.Tasks().BeginChunk(ctx, ledger.TaskChunk{Task: cid, From: 0, To: 1}, ledger.TaskMove{Kind: "replay", By: "carol", At: at,
			Replay: []ledger.ReplayItem{{Idx: 0, File: "d.json", Ino: 14}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Tasks().Move(ctx, cid, ledger.TaskTransition{From: []string{ledger.TaskRunning}, To: end, By: "dave"}); err != nil {
			t.Fatal(err)
		}
		if err := db.Replays().Finish(ctx, ciid, []ledger.Replay{{File: "d.json", NewName: "d.json", Ino: 14, By: "carol", At: at}}, at); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{ledger.TaskCancelled: ledger.TaskCancelled, ledger.TaskFailed: ledger.TaskDone}[end]
		if got, err := db.Tasks().Get(ctx, cid); err != nil || got.State != want || got.Done != 1 {
			t.Fatalf("%s task after its last chunk = %+v, %v; want %s", end, got, err, want)
		}
	}
}
