package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// A task moves its files in chunks, each a replay intent or a discard
// batch of its own (the chunk's move), begun in the transaction that
// moves the task's cursor past it, so that a chunk is begun once however
// many runs try it (Tasks.BeginChunk). A task asked and run at once is
// recorded in the transaction that begins its first move, with the
// action's audit row (Tasks.Start): a run killed at any instant has either
// recorded nothing or a task with its move under way, which the next
// replay, discard, consume or fsck --repair finishes. Finishing a move,
// by whichever run finishes it, counts its files in the task and ends
// the task when it was its last (countChunk, endTask).

// TaskMove is the move of one chunk of a task as it is begun: a replay
// intent (Kind "replay", with the items of Replay) or a discard batch
// (Kind "discard", with the items of Discard and ToDir, the directory the
// files go to, "" to delete them). By is who moves them, Note why, At
// when. Each item's Idx is its file's in the task's set.
type TaskMove struct {
	Kind     string
	By, Note string
	ToDir    string
	At       time.Time
	Replay   []ReplayItem
	Discard  []DiscardItem
}

// size is the number of files of m.
func (m TaskMove) size() int { return len(m.Replay) + len(m.Discard) }

// TaskStart is a task recorded and begun at once (Tasks.Start).
type TaskStart struct {
	// Task is the task, recorded running with its cursor past Move's
	// files and created at Move.At: its ID, State, Next, Created, counts
	// and ends are ignored.
	Task  TaskRecord
	Files []TaskFile
	// Move is its first chunk, the files of the set from Idx 0.
	Move TaskMove
	// Audit is the audit row of the action that asks and runs the task,
	// written started (AuditLog.Begin's) with the task's id.
	Audit AuditEntry
}

// TaskStarted holds the ids Tasks.Start recorded: the task's, its first
// move's (a replay intent's or discard batch's) and the audit row's.
type TaskStarted struct {
	Task, Move, Audit int64
}

// taskLink says which task a move being begun is a chunk of: chunk, the
// next chunk of a running task; start, a new task whose first chunk it
// is. After link ran, task and audit are the ids it recorded.
type taskLink struct {
	chunk       *TaskChunk
	start       *TaskStart
	task, audit int64
}

// link records, in tx, the task side of a move begun at at (the cursor of
// the chunk moved, or the new task and its audit row), and returns the
// task id to store with the move.
func (db *DB) link(ctx context.Context, tx *sql.Tx, l *taskLink, at time.Time) (any, error) {
	if l.chunk != nil {
		if err := db.beginChunk(ctx, tx, *l.chunk, at); err != nil {
			return nil, err
		}
		l.task = l.chunk.Task
		return l.task, nil
	}
	t := l.start.Task
	t.State, t.Next, t.Created = TaskRunning, l.start.Move.size(), at
	id, err := db.insertTask(ctx, tx, t, l.start.Files)
	if err != nil {
		return nil, err
	}
	e := l.start.Audit
	e.Task, e.At = id, at
	if err := checkAuditEntry(e); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if l.audit, err = db.auditInsertTx(ctx, tx, e, AuditStarted, "{}", "", nil); err != nil {
		return nil, err
	}
	l.task = id
	return id, nil
}

// beginMove commits move m as link says, and returns its id.
func (db *DB) beginMove(ctx context.Context, link *taskLink, m TaskMove) (int64, error) {
	switch {
	case m.Kind == "replay" && len(m.Discard) == 0:
		return db.beginReplay(ctx, link, m.By, m.Note, m.At, m.Replay)
	case m.Kind == "discard" && len(m.Replay) == 0:
		return db.beginDiscard(ctx, link, m.By, m.Note, m.ToDir, m.At, m.Discard)
	}
	return 0, fmt.Errorf("begin move: kind %q with %d replay and %d discard items", m.Kind, len(m.Replay), len(m.Discard))
}

// BeginChunk commits move m as chunk c of a running task: in the same
// transaction it moves the task's cursor from c.From to c.To (and records
// the files found changed), so that the chunk is begun exactly once. It
// returns the move's id (the intent's or the batch's). It fails with an
// error wrapping ErrTaskState, committing nothing, when the task is no
// longer running or its cursor is not at c.From.
func (ts Tasks) BeginChunk(ctx context.Context, c TaskChunk, m TaskMove) (int64, error) {
	return ts.db.beginMove(ctx, &taskLink{chunk: &c}, m)
}

// Start records task s.Task with its file set, running, its first
// move s.Move begun and the action's audit row started, in one
// transaction: a task asked and run at once (package task's Service.Do),
// so that no run killed before its first move leaves a task behind, nor a
// move without its task or its audit. The move must hold the first files
// of the set, and not more than it has.
func (ts Tasks) Start(ctx context.Context, s TaskStart) (TaskStarted, error) {
	if n := s.Move.size(); n == 0 || n > len(s.Files) {
		return TaskStarted{}, fmt.Errorf("start task: a first move of %d files for a set of %d", n, len(s.Files))
	}
	link := &taskLink{start: &s}
	move, err := ts.db.beginMove(ctx, link, s.Move)
	if err != nil {
		return TaskStarted{}, err
	}
	return TaskStarted{Task: link.task, Move: move, Audit: link.audit}, nil
}

// endTask marks the task of the move id of table done, in tx, when the
// move just finished was its last: the task is running (or failed: its
// run stopped on an error, and another finished the move), every file of
// its set is in a chunk begun, and none of its chunks is unfinished. A
// task cancelled meanwhile stays cancelled.
func (db *DB) endTask(ctx context.Context, tx *sql.Tx, table string, id int64, at time.Time) error {
	_, err := tx.ExecContext(ctx, db.dialect.Rebind(`UPDATE spool_tasks SET state = 'done', ended_at = ?, updated_at = ?
WHERE id = (SELECT task_id FROM `+table+` WHERE id = ?) AND state IN ('running', 'failed') AND next_idx >= files
  AND NOT EXISTS (SELECT 1 FROM replay_intents r WHERE r.task_id = spool_tasks.id AND r.state <> 'done')
  AND NOT EXISTS (SELECT 1 FROM discard_batches b WHERE b.task_id = spool_tasks.id AND b.state <> 'done')`),
		formatTime(at), formatTime(at), id)
	if err != nil {
		return fmt.Errorf("end task: %w", err)
	}
	return nil
}
