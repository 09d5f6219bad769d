package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// A replay or discard run at once (no approval, no rate, no filter) is
// still a task, so that spool tasks lists every replay and discard with
// who asked, its file set and its progress: its task is recorded in the
// transaction that begins its one intent or batch, with the cursor past
// the whole set, so the move stays all or nothing (package replay) and
// no run can take a chunk of it. Finishing the move, by whichever run
// finishes it, ends the task (countChunk).

// taskLink says which task a replay intent or discard batch being begun
// belongs to: chunk, the next chunk of a running task; whole, a new task
// the move is the whole of, with its files; neither, none.
type taskLink struct {
	chunk *TaskChunk
	whole *TaskRecord
	files []TaskFile
	// id is the task's id once link has run.
	id int64
}

// link records, in tx, the task side of a move begun at at (the cursor
// of the chunk moved, or the whole task inserted), and returns the task
// id to store with the move: nil for none.
func (db *DB) link(ctx context.Context, tx *sql.Tx, l *taskLink, at time.Time) (any, error) {
	switch {
	case l.chunk != nil:
		if err := db.beginChunk(ctx, tx, *l.chunk, at); err != nil {
			return nil, err
		}
		l.id = l.chunk.Task
	case l.whole != nil:
		t := *l.whole
		t.State, t.Next, t.Created = TaskRunning, t.Files, at
		id, err := db.insertTask(ctx, tx, t, l.files)
		if err != nil {
			return nil, err
		}
		l.id = id
	default:
		return nil, nil
	}
	return l.id, nil
}

// BeginReplayTask is BeginReplay for a replay run as one move: in the same
// transaction it records task t (running, every file of files begun, its
// Created at), whose one chunk the intent is, and returns the task's id
// with the intent's. files number the set as items do (Idx). ID, State,
// Next, Created, the counts and the ends of t are ignored.
func (db *DB) BeginReplayTask(ctx context.Context, t TaskRecord, files []TaskFile, by, note string, at time.Time, items []ReplayItem) (task, intent int64, err error) {
	if len(files) != len(items) {
		return 0, 0, fmt.Errorf("begin replay: %d task files for %d items", len(files), len(items))
	}
	link := &taskLink{whole: &t, files: files}
	intent, err = db.beginReplay(ctx, link, by, note, at, items)
	return link.id, intent, err
}

// BeginDiscardTask is BeginDiscard for a discard run as one move, as
// BeginReplayTask is BeginReplay's.
func (db *DB) BeginDiscardTask(ctx context.Context, t TaskRecord, files []TaskFile, by, note, toDir string, at time.Time, items []DiscardItem) (task, batch int64, err error) {
	if len(files) != len(items) {
		return 0, 0, fmt.Errorf("begin discard: %d task files for %d items", len(files), len(items))
	}
	link := &taskLink{whole: &t, files: files}
	batch, err = db.beginDiscard(ctx, link, by, note, toDir, at, items)
	return link.id, batch, err
}

// endTask marks the task of the move id of table done, in tx, when the
// move just finished was its last: the task is running, every file of its
// set is in a chunk begun, and none of its chunks is unfinished. A task
// cancelled meanwhile stays cancelled.
func (db *DB) endTask(ctx context.Context, tx *sql.Tx, table string, id int64, at time.Time) error {
	_, err := tx.ExecContext(ctx, db.dialect.Rebind(`UPDATE spool_tasks SET state = 'done', ended_at = ?, updated_at = ?
WHERE id = (SELECT task_id FROM `+table+` WHERE id = ?) AND state = 'running' AND next_idx >= files
  AND NOT EXISTS (SELECT 1 FROM replay_intents r WHERE r.task_id = spool_tasks.id AND r.state <> 'done')
  AND NOT EXISTS (SELECT 1 FROM discard_batches b WHERE b.task_id = spool_tasks.id AND b.state <> 'done')`),
		formatTime(at), formatTime(at), id)
	if err != nil {
		return fmt.Errorf("end task: %w", err)
	}
	return nil
}
