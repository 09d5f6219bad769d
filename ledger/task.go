package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A task is a replay or a discard recorded before it runs, with the exact
// file set it resolved to, so that it can wait for an approval, run at a
// rate, be cancelled and resume after a kill (package task,
// docs/DESIGN.md, "Tasks"). It moves its files in chunks; each chunk is
// a replay intent or a discard batch of its own, begun together with the
// task's cursor in one transaction (Tasks.BeginChunk, Tasks.Start:
// taskmove.go), and finishing the chunk (ReplayLog.Finish, DiscardLog.Finish, by
// whichever run finishes it) counts its files in the task in the same
// transaction.

// Tasks is the ledger's tasks (tables spool_tasks and spool_task_files)
// and the queue's approval policy for them (spool_approval_policy): a
// task's exact file set,
// recorded when it is created and never changed after, its state, moved
// only along the transitions Tasks.Move allows, and its cursor, advanced
// only together with the chunk that moves its files. Reached by DB.Tasks.
type Tasks struct{ db *DB }

// Tasks returns the ledger's tasks.
func (db *DB) Tasks() Tasks { return Tasks{db} }

// Task states, as stored in spool_tasks.state.
const (
	// TaskWaiting: recorded, waiting for a second operator's approval.
	TaskWaiting = "waiting"
	// TaskApproved: may run; nothing moved yet.
	TaskApproved = "approved"
	// TaskRunning: moving its files, chunk by chunk (or killed while it
	// was: a run resumes it from its cursor).
	TaskRunning = "running"
	// TaskDone: every file of the set was moved, found gone, or found
	// changed and left.
	TaskDone = "done"
	// TaskCancelled: stopped before its end; the chunk under way when it
	// was cancelled still finishes, no further one begins.
	TaskCancelled = "cancelled"
	// TaskFailed: stopped on an error (Detail says which).
	TaskFailed = "failed"
)

// TaskStates are the states in their order of a task's life.
var TaskStates = []string{TaskWaiting, TaskApproved, TaskRunning, TaskDone, TaskCancelled, TaskFailed}

// ErrTaskNotFound is wrapped for a task id the ledger does not hold.
var ErrTaskNotFound = errors.New("no such task")

// ErrTaskState is wrapped by the transitions when the task is not in a
// state they start from (it was approved, cancelled or finished meanwhile),
// and by Tasks.BeginChunk when the task is no longer
// running or its cursor moved (another run took that chunk).
var ErrTaskState = errors.New("task is not in that state")

// TaskRecord is a task as the ledger holds it.
type TaskRecord struct {
	ID int64
	// Kind is "replay" or "discard".
	Kind string
	// State is one of TaskStates.
	State string
	// Request is what was asked, as JSON text (package task's Request).
	Request string
	// Files is the size of the file set; Digest identifies it
	// (package task); Skipped counts the selected files left out of it
	// (a replay's messages processed already).
	Files   int
	Digest  string
	Skipped int
	// By, Role and Via are who asked, with which role ("" on the command
	// line) and how (AuditCLI, AuditHTTP); Note is why.
	By, Role, Via, Note string
	// ByOS is the OS user the requester is, when known (package task:
	// the OS user on the command line, a token line's os= over HTTP), by
	// which an approval by the same person in another realm is refused.
	ByOS    string
	Created time.Time
	// ApprovedBy and Approved are who approved it and when; empty and zero
	// for a task that needed no approval or has not had it.
	ApprovedBy string
	Approved   time.Time
	// EndedBy is who cancelled it ("" when it ended by itself); Ended is
	// when it reached done, cancelled or failed.
	EndedBy string
	Ended   time.Time
	// Next is the cursor: the files of the set before it (by Idx) are in
	// chunks begun. Done, Missing and Changed count the files of finished
	// chunks moved (or deleted), gone from error/ before their chunk, and
	// found changed since the request and left.
	Next, Done, Missing, Changed int
	// Detail is why it failed or was cancelled; may be empty.
	Detail  string
	Updated time.Time
}

// TaskFile is one file of a task's set.
type TaskFile struct {
	// Idx numbers it in the set, from 0, in the set's order.
	Idx int
	// File is its exact name in error/ and Ino its inode when the task was
	// asked; ContentHash the hex SHA-256 of its body ("" for a file that
	// is not regular) and Size its size.
	File        string
	Ino         uint64
	ContentHash string
	Size        int64
	// MsgID and Reason are the message's key and dead-letter reason,
	// when known.
	MsgID, Reason string
	// ChangedWhy says why the file was found changed when its chunk came,
	// and so was not moved; "" otherwise.
	ChangedWhy string
}

// TaskChunk is the next chunk of a running task: the files of its set
// from From to To (by Idx, To excluded), of which Changed (by Idx, with
// why) were found changed and are left out of the chunk's intent or batch.
type TaskChunk struct {
	Task     int64
	From, To int
	Changed  map[int]string
}

// Create commits a task in state (TaskWaiting or TaskApproved) with
// its file set, and returns its id. ID, the counts, EndedBy, Ended,
// Detail and Updated of t are ignored, and Next must be 0.
func (ts Tasks) Create(ctx context.Context, t TaskRecord, files []TaskFile) (int64, error) {
	if err := ts.db.open(); err != nil {
		return 0, err
	}
	switch {
	case t.State != TaskWaiting && t.State != TaskApproved:
		return 0, fmt.Errorf("create task: state %q: want waiting or approved", t.State)
	case t.Next != 0:
		return 0, fmt.Errorf("create task: cursor %d: a new task has begun nothing", t.Next)
	}
	var id int64
	err := ts.db.inTx(ctx, func(tx *sql.Tx) (err error) {
		id, err = ts.db.insertTask(ctx, tx, t, files)
		return err
	})
	if err != nil {
		return 0, ts.db.fail("create task", err)
	}
	return id, nil
}

// insertTask inserts, in tx, task t in t.State with its file set and its
// cursor at t.Next, and returns its id.
func (db *DB) insertTask(ctx context.Context, tx *sql.Tx, t TaskRecord, files []TaskFile) (id int64, err error) {
	switch {
	case t.Kind == "" || strings.TrimSpace(t.By) == "" || t.Via == "":
		return 0, errors.New("insert task: kind, by and via are required")
	case t.Files != len(files):
		return 0, fmt.Errorf("insert task: %d files, but Files says %d", len(files), t.Files)
	}
	if t.Request == "" {
		t.Request = "{}"
	}
	now := formatTime(t.Created)
	var approvedAt any
	if !t.Approved.IsZero() {
		approvedAt = formatTime(t.Approved)
	}
	if err := tx.QueryRowContext(ctx, db.dialect.Rebind(`INSERT INTO spool_tasks
    (kind, state, request, files, next_idx, skipped, digest, by_user, by_os, by_role, via, note, created_at, approved_by, approved_at, ended_by, detail, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', '', ?) RETURNING id`),
		t.Kind, t.State, clean(t.Request), t.Files, t.Next, t.Skipped, t.Digest, clean(t.By), clean(t.ByOS), clean(t.Role), clean(t.Via),
		clean(t.Note), now, clean(t.ApprovedBy), approvedAt, now).Scan(&id); err != nil {
		return 0, fmt.Errorf("insert task: %w", err)
	}
	ins, err := tx.PrepareContext(ctx, db.dialect.Rebind(`INSERT INTO spool_task_files
    (task_id, idx, file, ino, content_hash, size, msg_id, reason, changed_why) VALUES (?, ?, ?, ?, ?, ?, ?, ?, '')`))
	if err != nil {
		return 0, fmt.Errorf("insert files: %w", err)
	}
	defer ins.Close()
	for _, f := range files {
		// file is kept exact, not cleaned: the task finds the file by it.
		if _, err := ins.ExecContext(ctx, id, f.Idx, f.File, nullIno(f.Ino), f.ContentHash, f.Size, clean(f.MsgID), clean(f.Reason)); err != nil {
			return 0, fmt.Errorf("insert file %s: %w", clean(f.File), err)
		}
	}
	return id, nil
}

const taskColumns = `id, kind, state, request, files, skipped, digest, by_user, by_os, by_role, via, note, created_at,
approved_by, approved_at, ended_by, ended_at, next_idx, done, missing, changed, detail, updated_at`

// Get returns task id, or an error wrapping ErrTaskNotFound.
func (ts Tasks) Get(ctx context.Context, id int64) (TaskRecord, error) {
	if err := ts.db.open(); err != nil {
		return TaskRecord{}, err
	}
	rows, err := ts.db.tasks(ctx, fmt.Sprintf("read task %d", id), ` WHERE id = ?`, id)
	if err != nil {
		return TaskRecord{}, err
	}
	if len(rows) == 0 {
		return TaskRecord{}, fmt.Errorf("task %d: %w", id, ErrTaskNotFound)
	}
	return rows[0], nil
}

// TaskQuery selects tasks for Tasks.List; the zero value is every task.
type TaskQuery struct {
	// States keeps the tasks in one of these states; empty for all.
	States []string
	// Before keeps the tasks whose ID is smaller (a cursor: the last ID of
	// the previous page); 0 for all.
	Before int64
	// Limit is the most tasks returned, newest first; 0 or less for all.
	Limit int
}

// List returns the tasks q selects, newest first (by ID). It only reads.
func (ts Tasks) List(ctx context.Context, q TaskQuery) ([]TaskRecord, error) {
	if err := ts.db.open(); err != nil {
		return nil, err
	}
	where, args := ` WHERE 1 = 1`, []any{}
	if q.Before > 0 {
		where += ` AND id < ?`
		args = append(args, q.Before)
	}
	if len(q.States) > 0 {
		where += ` AND state IN (?` + strings.Repeat(", ?", len(q.States)-1) + `)`
		for _, s := range q.States {
			args = append(args, s)
		}
	}
	where += ` ORDER BY id DESC`
	if q.Limit > 0 {
		where += fmt.Sprintf(` LIMIT %d`, q.Limit)
	}
	return ts.db.tasks(ctx, "list tasks", where, args...)
}

func (db *DB) tasks(ctx context.Context, op, where string, args ...any) ([]TaskRecord, error) {
	return queryAll(ctx, db, op, db.dialect.Rebind(`SELECT `+taskColumns+` FROM spool_tasks`+where), args, scanTask)
}

// scanTask reads one row of taskColumns.
func scanTask(rows *sql.Rows) (TaskRecord, error) {
	var (
		t                         TaskRecord
		created, updated          string
		approved, ended           sql.NullString
		files, skipped            int64
		next, done, miss, changed int64
	)
	if err := rows.Scan(&t.ID, &t.Kind, &t.State, &t.Request, &files, &skipped, &t.Digest, &t.By, &t.ByOS, &t.Role, &t.Via, &t.Note,
		&created, &t.ApprovedBy, &approved, &t.EndedBy, &ended, &next, &done, &miss, &changed, &t.Detail, &updated); err != nil {
		return t, err
	}
	t.Files, t.Skipped, t.Next, t.Done, t.Missing, t.Changed = int(files), int(skipped), int(next), int(done), int(miss), int(changed)
	for _, c := range []struct {
		col string
		s   sql.NullString
		to  *time.Time
	}{{"created_at", sql.NullString{String: created, Valid: true}, &t.Created}, {"updated_at", sql.NullString{String: updated, Valid: true}, &t.Updated},
		{"approved_at", approved, &t.Approved}, {"ended_at", ended, &t.Ended}} {
		if !c.s.Valid {
			continue
		}
		var err error
		if *c.to, err = parseTime("spool_tasks."+c.col, c.s.String); err != nil {
			return t, fmt.Errorf("task %d: %w", t.ID, err)
		}
	}
	return t, nil
}

// Files returns the files of task id's set with from <= Idx < to, in
// Idx order (to <= 0 for all from from).
func (ts Tasks) Files(ctx context.Context, id int64, from, to int) ([]TaskFile, error) {
	op := fmt.Sprintf("list files of task %d", id)
	if err := ts.db.open(); err != nil {
		return nil, err
	}
	q, args := `SELECT idx, file, ino, content_hash, size, msg_id, reason, changed_why FROM spool_task_files
WHERE task_id = ? AND idx >= ?`, []any{id, from}
	if to > 0 {
		q += ` AND idx < ?`
		args = append(args, to)
	}
	rows, err := ts.db.sql.QueryContext(ctx, ts.db.dialect.Rebind(q+` ORDER BY idx`), args...)
	if err != nil {
		return nil, ts.db.fail(op, err)
	}
	defer rows.Close()
	var out []TaskFile
	for rows.Next() {
		var (
			f   TaskFile
			ino sql.NullInt64
		)
		if err := rows.Scan(&f.Idx, &f.File, &ino, &f.ContentHash, &f.Size, &f.MsgID, &f.Reason, &f.ChangedWhy); err != nil {
			return nil, ts.db.fail(op, err)
		}
		f.Ino = uint64(ino.Int64)
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, ts.db.fail(op, err)
	}
	return out, nil
}

// TaskTransition is a change of a task's state by Tasks.Move.
type TaskTransition struct {
	// From are the states the task may be in; To is the state it gets.
	From []string
	To   string
	// By is who makes the change: recorded as ApprovedBy for To
	// TaskApproved, as EndedBy for TaskCancelled.
	By string
	// Detail, when not empty, is recorded as the task's Detail.
	Detail string
	// At is when; zero for now.
	At time.Time
}

// Move changes task id's state as tr says, in one statement that
// holds only while the task is in one of tr.From: otherwise it changes
// nothing and fails with an error wrapping ErrTaskState (or
// ErrTaskNotFound). Reaching done, cancelled or failed sets Ended.
func (ts Tasks) Move(ctx context.Context, id int64, tr TaskTransition) error {
	op := fmt.Sprintf("task %d: %s", id, tr.To)
	if err := ts.db.open(); err != nil {
		return err
	}
	if !slices.Contains(TaskStates, tr.To) || len(tr.From) == 0 {
		return fmt.Errorf("%s: bad transition from %v", op, tr.From)
	}
	at := tr.At
	if at.IsZero() {
		at = time.Now()
	}
	set, args := `state = ?, updated_at = ?`, []any{tr.To, formatTime(at)}
	switch tr.To {
	case TaskApproved:
		set += `, approved_by = ?, approved_at = ?`
		args = append(args, clean(tr.By), formatTime(at))
	case TaskCancelled, TaskDone, TaskFailed:
		set += `, ended_by = ?, ended_at = ?`
		args = append(args, clean(tr.By), formatTime(at))
	}
	if tr.Detail != "" {
		set += `, detail = ?`
		args = append(args, clean(tr.Detail))
	}
	args = append(args, id)
	for _, s := range tr.From {
		args = append(args, s)
	}
	res, err := ts.db.sql.ExecContext(ctx, ts.db.dialect.Rebind(`UPDATE spool_tasks SET `+set+` WHERE id = ? AND state IN (?`+
		strings.Repeat(", ?", len(tr.From)-1)+`)`), args...)
	if err != nil {
		return ts.db.fail(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return ts.db.fail(op, err)
	}
	if n == 0 {
		if _, err := ts.Get(ctx, id); err != nil {
			return err
		}
		return fmt.Errorf("%s: %w", op, ErrTaskState)
	}
	return nil
}

// beginChunk is the part of Tasks.BeginChunk on the
// task: in tx, it moves the cursor of running task c.Task from c.From to
// c.To and records c.Changed, or fails with ErrTaskState.
func (db *DB) beginChunk(ctx context.Context, tx *sql.Tx, c TaskChunk, at time.Time) error {
	res, err := tx.ExecContext(ctx, db.dialect.Rebind(`UPDATE spool_tasks SET next_idx = ?, changed = changed + ?, updated_at = ?
WHERE id = ? AND state = 'running' AND next_idx = ?`), c.To, len(c.Changed), formatTime(at), c.Task, c.From)
	if err != nil {
		return fmt.Errorf("move cursor: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("task %d at %d: %w", c.Task, c.From, ErrTaskState)
	}
	if len(c.Changed) == 0 {
		return nil
	}
	upd, err := tx.PrepareContext(ctx, db.dialect.Rebind(`UPDATE spool_task_files SET changed_why = ? WHERE task_id = ? AND idx = ?`))
	if err != nil {
		return fmt.Errorf("record changed files: %w", err)
	}
	defer upd.Close()
	for idx, why := range c.Changed {
		if _, err := upd.ExecContext(ctx, clean(why), c.Task, idx); err != nil {
			return fmt.Errorf("record changed file %d: %w", idx, err)
		}
	}
	return nil
}

// Advance moves the cursor of a chunk that moves no file (each of its
// files was found changed), as Tasks.BeginChunk would.
func (ts Tasks) Advance(ctx context.Context, c TaskChunk) error {
	if err := ts.db.open(); err != nil {
		return err
	}
	if err := ts.db.inTx(ctx, func(tx *sql.Tx) error { return ts.db.beginChunk(ctx, tx, c, time.Now()) }); err != nil {
		return ts.db.fail(fmt.Sprintf("advance task %d", c.Task), err)
	}
	return nil
}

// countChunk adds, in tx, what the finished intent or batch id of table
// (replay_intents, discard_batches) did to its task, if it is a task's
// chunk: done files moved, missing ones gone; and ends the task when this
// was its last chunk (endTask).
func (db *DB) countChunk(ctx context.Context, tx *sql.Tx, table string, id int64, done, missing int, at time.Time) error {
	_, err := tx.ExecContext(ctx, db.dialect.Rebind(`UPDATE spool_tasks SET done = done + ?, missing = missing + ?, updated_at = ?
WHERE id = (SELECT task_id FROM `+table+` WHERE id = ?)`), done, missing, formatTime(at), id)
	if err != nil {
		return fmt.Errorf("count in task: %w", err)
	}
	return db.endTask(ctx, tx, table, id, at)
}
