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
	if _, err := db.CreateTask(ctx, ledger.TaskRecord{Kind: "replay", State: ledger.TaskRunning, By: "a", Via: "cli"}, nil); err == nil {
		t.Error("CreateTask running: nil error")
	}
	id, err := db.CreateTask(ctx, rec, files)
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.Task(ctx, id)
	if err != nil || got.State != ledger.TaskWaiting || got.Files != 3 || got.Skipped != 1 || got.By != "token:alice" || got.ByOS != "alice" || got.Role != "operator" ||
		!got.Created.Equal(at) || got.Request != rec.Request || got.Digest != "d1" {
		t.Fatalf("Task = %+v, %v", got, err)
	}
	if _, err := db.Task(ctx, id+100); !errors.Is(err, ledger.ErrTaskNotFound) {
		t.Errorf("Task(unknown) = %v", err)
	}
	if fs, err := db.TaskFiles(ctx, id, 1, 3); err != nil || len(fs) != 2 || fs[0] != files[1] || fs[1] != files[2] {
		t.Errorf("TaskFiles = %+v, %v", fs, err)
	}
	if err := db.MoveTask(ctx, id, ledger.TaskTransition{From: []string{ledger.TaskApproved}, To: ledger.TaskRunning}); !errors.Is(err, ledger.ErrTaskState) {
		t.Errorf("running from approved while waiting: %v", err)
	}
	if err := db.MoveTask(ctx, id, ledger.TaskTransition{From: []string{ledger.TaskWaiting}, To: ledger.TaskApproved, By: "bob", At: at.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	chunk := ledger.TaskChunk{Task: id, From: 0, To: 2, Changed: map[int]string{1: "its body changed"}}
	if _, err := db.BeginTaskReplay(ctx, chunk, "alice", "", at, []ledger.ReplayItem{{Idx: 0, File: "a.json", Ino: 11}}); !errors.Is(err, ledger.ErrTaskState) {
		t.Errorf("chunk of a task not running: %v", err)
	}
	if err := db.MoveTask(ctx, id, ledger.TaskTransition{From: []string{ledger.TaskApproved}, To: ledger.TaskRunning}); err != nil {
		t.Fatal(err)
	}
	iid, err := db.BeginTaskReplay(ctx, chunk, "alice", "", at, []ledger.ReplayItem{{Idx: 0, File: "a.json", Ino: 11}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.BeginTaskReplay(ctx, chunk, "alice", "", at, []ledger.ReplayItem{{Idx: 0, File: "a.json", Ino: 11}}); !errors.Is(err, ledger.ErrTaskState) {
		t.Errorf("the same chunk twice: %v", err)
	}
	if un, err := db.TaskHasUnfinished(ctx, id); err != nil || !un {
		t.Errorf("TaskHasUnfinished = %v, %v; want true", un, err)
	}
	if err := db.FinishReplay(ctx, iid, []ledger.Replay{{File: "a.json", NewName: "a.json", Ino: 11, By: "alice", At: at}}, at); err != nil {
		t.Fatal(err)
	}
	if un, err := db.TaskHasUnfinished(ctx, id); err != nil || un {
		t.Errorf("TaskHasUnfinished = %v, %v; want false", un, err)
	}
	got, err = db.Task(ctx, id)
	if err != nil || got.Next != 2 || got.Done != 1 || got.Missing != 0 || got.Changed != 1 || got.ApprovedBy != "bob" {
		t.Fatalf("Task after a chunk = %+v, %v", got, err)
	}
	if fs, err := db.TaskFiles(ctx, id, 1, 2); err != nil || len(fs) != 1 || fs[0].ChangedWhy != "its body changed" {
		t.Errorf("TaskFiles = %+v, %v", fs, err)
	}
	// A discard chunk whose file was gone counts it missing.
	bid, err := db.BeginTaskDiscard(ctx, ledger.TaskChunk{Task: id, From: 2, To: 3}, "alice", "n", "", at,
		[]ledger.DiscardItem{{Idx: 2, File: "c.json", Ino: 13, Reason: "handler", Size: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.FinishDiscard(ctx, bid, []ledger.DiscardItem{{Idx: 2, File: "c.json", Outcome: ledger.DiscardMissing}}, at); err != nil {
		t.Fatal(err)
	}
	// Its last chunk finished, the task is done, in the same transaction.
	if err := db.MoveTask(ctx, id, ledger.TaskTransition{From: []string{ledger.TaskRunning}, To: ledger.TaskDone}); !errors.Is(err, ledger.ErrTaskState) {
		t.Errorf("done after its last chunk finished: MoveTask = %v, want ErrTaskState", err)
	}
	got, err = db.Task(ctx, id)
	if err != nil || got.State != ledger.TaskDone || got.Next != 3 || got.Done != 1 || got.Missing != 1 || got.Ended.IsZero() {
		t.Fatalf("Task done = %+v, %v", got, err)
	}
	if err := db.MoveTask(ctx, id, ledger.TaskTransition{From: []string{ledger.TaskWaiting, ledger.TaskApproved, ledger.TaskRunning}, To: ledger.TaskCancelled}); !errors.Is(err, ledger.ErrTaskState) {
		t.Errorf("cancel of a done task: %v", err)
	}
	id2, err := db.CreateTask(ctx, ledger.TaskRecord{Kind: "discard", State: ledger.TaskApproved, Files: 0, Digest: "d2", By: "carol", Via: ledger.AuditCLI, Created: at}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ts, err := db.Tasks(ctx, ledger.TaskQuery{}); err != nil || len(ts) != 2 || ts[0].ID != id2 || ts[1].ID != id {
		t.Errorf("Tasks = %+v, %v", ts, err)
	}
	if ts, err := db.Tasks(ctx, ledger.TaskQuery{States: []string{ledger.TaskApproved, ledger.TaskWaiting}}); err != nil || len(ts) != 1 || ts[0].ID != id2 {
		t.Errorf("Tasks(approved) = %+v, %v", ts, err)
	}
	if ts, err := db.Tasks(ctx, ledger.TaskQuery{Before: id2, Limit: 1}); err != nil || len(ts) != 1 || ts[0].ID != id {
		t.Errorf("Tasks(before) = %+v, %v", ts, err)
	}
}

// testOneMoveTasks: a replay or discard run as one move begins its task
// with its intent or batch in one transaction, running with its whole
// set begun, and finishing the move ends the task done with its counts;
// a cancelled task whose last chunk finishes stays cancelled.
func testOneMoveTasks(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	rec := ledger.TaskRecord{Kind: "replay", Request: `{"kind":"replay","selection":{"all":true}}`, Files: 2, Digest: "d1", Skipped: 1,
		By: "alice", Via: ledger.AuditCLI, Note: "fixed"}
	files := []ledger.TaskFile{{Idx: 0, File: "a.json", Ino: 11, MsgID: "a"}, {Idx: 1, File: "b.json", Ino: 12}}
	items := []ledger.ReplayItem{{Idx: 0, File: "a.json", Ino: 11}, {Idx: 1, File: "b.json", Ino: 12}}
	if _, _, err := db.BeginReplayTask(ctx, rec, files[:1], "alice", "fixed", at, items); err == nil {
		t.Error("BeginReplayTask with fewer task files than items: nil error")
	}
	tid, iid, err := db.BeginReplayTask(ctx, rec, files, "alice", "fixed", at, items)
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.Task(ctx, tid)
	if err != nil || got.State != ledger.TaskRunning || got.Next != 2 || got.Files != 2 || got.Skipped != 1 || got.By != "alice" ||
		got.Via != ledger.AuditCLI || !got.Created.Equal(at) || got.Request != rec.Request || got.Done != 0 {
		t.Fatalf("Task after BeginReplayTask = %+v, %v", got, err)
	}
	if un, err := db.UnfinishedReplays(ctx); err != nil || len(un) != 1 || un[0].ID != iid || len(un[0].Items) != 2 {
		t.Fatalf("UnfinishedReplays = %+v, %v", un, err)
	}
	// No run can take a chunk of it: its cursor is past its set.
	if _, err := db.BeginTaskReplay(ctx, ledger.TaskChunk{Task: tid, From: 0, To: 1}, "bob", "", at, items[:1]); !errors.Is(err, ledger.ErrTaskState) {
		t.Errorf("a chunk of a one-move task: %v, want ErrTaskState", err)
	}
	if err := db.FinishReplay(ctx, iid, []ledger.Replay{{File: "a.json", NewName: "a.json", Ino: 11, By: "alice", At: at}}, at.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err = db.Task(ctx, tid)
	if err != nil || got.State != ledger.TaskDone || got.Done != 1 || got.Missing != 1 || !got.Ended.Equal(at.Add(time.Second)) {
		t.Fatalf("Task after its move finished = %+v, %v", got, err)
	}

	drec := ledger.TaskRecord{Kind: "discard", Files: 1, Digest: "d2", By: "bob", Via: ledger.AuditCLI, Note: "spam"}
	did, bid, err := db.BeginDiscardTask(ctx, drec, []ledger.TaskFile{{Idx: 0, File: "c.json", Ino: 13, ContentHash: "cc", Size: 2}},
		"bob", "spam", "", at, []ledger.DiscardItem{{Idx: 0, File: "c.json", Ino: 13, ContentHash: "cc", Size: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := db.Task(ctx, did); err != nil || got.State != ledger.TaskRunning || got.Kind != "discard" || got.Next != 1 {
		t.Fatalf("Task after BeginDiscardTask = %+v, %v", got, err)
	}
	if err := db.FinishDiscard(ctx, bid, []ledger.DiscardItem{{Idx: 0, File: "c.json", Outcome: ledger.DiscardDeleted}}, at); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Task(ctx, did); err != nil || got.State != ledger.TaskDone || got.Done != 1 || got.Missing != 0 {
		t.Fatalf("Task after its discard finished = %+v, %v", got, err)
	}

	// A task cancelled while its last chunk was under way stays cancelled.
	cid, err := db.CreateTask(ctx, ledger.TaskRecord{Kind: "replay", State: ledger.TaskApproved, Files: 1, By: "carol", Via: ledger.AuditCLI, Created: at},
		[]ledger.TaskFile{{Idx: 0, File: "d.json", Ino: 14}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.MoveTask(ctx, cid, ledger.TaskTransition{From: []string{ledger.TaskApproved}, To: ledger.TaskRunning}); err != nil {
		t.Fatal(err)
	}
	ciid, err := db.BeginTaskReplay(ctx, ledger.TaskChunk{Task: cid, From: 0, To: 1}, "carol", "", at, []ledger.ReplayItem{{Idx: 0, File: "d.json", Ino: 14}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.MoveTask(ctx, cid, ledger.TaskTransition{From: []string{ledger.TaskRunning}, To: ledger.TaskCancelled, By: "dave"}); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishReplay(ctx, ciid, []ledger.Replay{{File: "d.json", NewName: "d.json", Ino: 14, By: "carol", At: at}}, at); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Task(ctx, cid); err != nil || got.State != ledger.TaskCancelled || got.Done != 1 {
		t.Fatalf("cancelled task after its last chunk = %+v, %v", got, err)
	}
}
