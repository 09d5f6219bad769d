package task

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/time/rate"

	"github.com/spoolq/spool/discard"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/replay"
)

// MaxChunk is the most files of one chunk: one replay intent or discard
// batch, one transaction to begin it and one to finish it. At a rate, a
// chunk is about a tenth of a second's files (at least one), so that a
// cancel is taken within about that.
const MaxChunk = 500

// Chunk is what one chunk of a run did, for RunOptions.OnChunk.
type Chunk struct {
	// Task is the task after the chunk.
	Task Task
	// Replays are a replay chunk's moves, in order.
	Replays []ledger.Replay
	// Discarded is a discard chunk's batch, each item with its outcome.
	Discarded ledger.DiscardBatch
	// Changed are the files found changed since the request, left where
	// they are, each with ChangedWhy.
	Changed []ledger.TaskFile
}

// RunOptions are Run's callbacks; each may be nil. They are called from
// Run's goroutine.
type RunOptions struct {
	// OnChunk is called after each chunk.
	OnChunk func(Chunk)
	// OnResumed is called for each replay intent a killed run (of this
	// task or another replay) left unfinished, finished before a chunk.
	OnResumed func(replay.Finished)
	// OnResumedDiscard is OnResumed for a discard batch.
	OnResumedDiscard func(ledger.DiscardBatch)
}

// Run runs task id as who until it is done, cancelled or fails, and
// returns it as it ended. The task must be approved, running (a run was
// killed, or runs elsewhere: several runs share the chunks, each begun
// once) or failed (resumed from its cursor); a waiting task fails with
// ErrState, and so do a done or cancelled one. who needs RoleOperator.
// The run is audited (action "run", started before the first chunk,
// closed with its counts).
//
// Each chunk is taken under the queue's replay lock: the replays and
// discards a killed run left unfinished are finished first (this task's
// own chunk among them), each file of the chunk is checked against the
// set (a changed one is left and counted), then the chunk is begun with
// the cursor and moved. At Request.Rate the run waits between chunks.
// A cancel stops it before the next chunk (the task is then cancelled, no
// error). When ctx is done, Run returns ctx's error after the chunk under
// way; the task stays running, for the next Run.
func (s *Service) Run(ctx context.Context, who Identity, id int64, opt RunOptions) (t Task, err error) {
	const action = "run"
	if who.Role < RoleOperator {
		return Task{}, s.refuse(ctx, who, action, id, nil, fmt.Errorf("%s as %s may not run task %d: operator needed: %w", who.Name, roleName(who.Role), id, ErrForbidden))
	}
	if t, err = s.Get(ctx, id); err != nil {
		return t, err
	}
	sel := map[string]any{"task": id, "kind": t.Kind, "files": t.Files, "digest": t.Digest, "by": t.By}
	switch t.State {
	case StateApproved, StateFailed:
		if err := s.Ledger.MoveTask(ctx, id, ledger.TaskTransition{From: []string{t.State}, To: StateRunning, By: who.Name}); err != nil && !errors.Is(err, ErrState) {
			return t, err
		}
	case StateRunning:
	default:
		return t, s.refuse(ctx, who, action, id, sel, fmt.Errorf("task %d is %s: %w", id, t.State, ErrState))
	}
	aid, err := s.Ledger.AuditBegin(ctx, s.entry(who, action, id, sel))
	if err != nil {
		return t, fmt.Errorf("run task %d: %w (nothing was moved: a task is not run unaudited)", id, err)
	}
	start := t
	defer func() {
		end := context.WithoutCancel(ctx)
		if now, gerr := s.Get(end, id); gerr == nil {
			t = now
		}
		counts := ledger.AuditCounts{"selected": int64(t.Files), "done": int64(t.Done - start.Done),
			"missing": int64(t.Missing - start.Missing), "changed": int64(t.Changed - start.Changed)}
		outcome, detail := ledger.AuditOK, fmt.Sprintf("task %d %s: %d of %d files begun", id, t.State, t.Next, t.Files)
		switch {
		case err != nil && ctx.Err() != nil:
			outcome, detail = ledger.AuditInterrupted, err.Error()
		case err != nil:
			outcome, detail = ledger.AuditFailed, err.Error()
			if merr := s.Ledger.MoveTask(end, id, ledger.TaskTransition{From: []string{StateRunning}, To: StateFailed, Detail: err.Error()}); merr == nil {
				t.State = StateFailed
			}
		case t.State == StateCancelled:
			outcome = ledger.AuditInterrupted
		}
		if aerr := s.Ledger.AuditEnd(end, aid, outcome, counts, detail); aerr != nil {
			err = errors.Join(err, aerr)
		}
	}()
	var to *queue.Target
	if t.Request.To != "" {
		if to, err = s.Dir.OpenTarget(t.Request.To); err != nil {
			return t, fmt.Errorf("task %d: --to: %w", id, err)
		}
		defer func() {
			if cerr := to.Close(); err == nil {
				err = cerr
			}
		}()
	}
	size := MaxChunk
	var lim *rate.Limiter
	if r := t.Request.Rate; r > 0 {
		size = max(1, min(MaxChunk, int(r/10)))
		lim = rate.NewLimiter(rate.Limit(r), size)
	}
	for {
		if lim != nil && t.Next < t.Files {
			if err := lim.WaitN(ctx, size); err != nil {
				return t, err
			}
		} else if err := ctx.Err(); err != nil {
			return t, err
		}
		c, more, err := s.chunk(ctx, t, size, to, opt)
		if err != nil {
			return t, err
		}
		t = c.Task
		if opt.OnChunk != nil && (len(c.Replays) > 0 || len(c.Discarded.Items) > 0 || len(c.Changed) > 0) {
			opt.OnChunk(c)
		}
		if !more {
			return t, nil
		}
	}
}

// chunk runs the next chunk of task t (of at most size files) under the
// replay lock, and reports whether more may follow. When the task is no
// longer running, or every file is in a chunk (then it marks it done), it
// returns with more false.
func (s *Service) chunk(ctx context.Context, t Task, size int, to *queue.Target, opt RunOptions) (c Chunk, more bool, err error) {
	unlock, finished, err := replay.Lock(ctx, s.Dir, s.Ledger)
	for _, f := range finished {
		if opt.OnResumed != nil {
			opt.OnResumed(f)
		}
	}
	if err != nil {
		return c, false, err
	}
	defer func() {
		if uerr := unlock(); err == nil && uerr != nil {
			err = uerr
		}
	}()
	discarded, err := discard.ResumeLocked(ctx, s.Dir, s.Ledger)
	for _, b := range discarded {
		if opt.OnResumedDiscard != nil {
			opt.OnResumedDiscard(b)
		}
	}
	if err != nil {
		return c, false, err
	}
	if c.Task, err = s.Get(ctx, t.ID); err != nil {
		return c, false, err
	}
	t = c.Task
	if t.State != StateRunning {
		return c, false, nil
	}
	if t.Next >= t.Files {
		// Every chunk begun, and finished above.
		if err := s.Ledger.MoveTask(ctx, t.ID, ledger.TaskTransition{From: []string{StateRunning}, To: StateDone}); err != nil && !errors.Is(err, ErrState) {
			return c, false, err
		}
		c.Task, err = s.Get(ctx, t.ID)
		return c, false, err
	}
	files, err := s.Ledger.TaskFiles(ctx, t.ID, t.Next, t.Next+size)
	if err != nil {
		return c, false, err
	}
	lc := ledger.TaskChunk{Task: t.ID, From: t.Next, To: t.Next + len(files), Changed: map[int]string{}}
	var keep []ledger.TaskFile
	for _, f := range files {
		why, err := s.check(f)
		if err != nil {
			return c, false, err
		}
		if why != "" {
			f.ChangedWhy = why
			lc.Changed[f.Idx] = why
			c.Changed = append(c.Changed, f)
			continue
		}
		keep = append(keep, f)
	}
	by, note := t.By, t.Request.Note
	if t.ApprovedBy != "" {
		note = fmt.Sprintf("task %d, approved by %s", t.ID, t.ApprovedBy)
		if t.Request.Note != "" {
			note = t.Request.Note + " (" + note + ")"
		}
	}
	switch {
	case len(keep) == 0:
		err = s.Ledger.AdvanceTask(ctx, lc)
	case t.Kind == Replay:
		items := make([]ledger.ReplayItem, len(keep))
		for i, f := range keep {
			items[i] = ledger.ReplayItem{Idx: f.Idx, File: f.File, Ino: f.Ino}
		}
		c.Replays, err = replay.RunChunk(ctx, s.Dir, s.Ledger, lc, items, by, note)
	default:
		items := make([]ledger.DiscardItem, len(keep))
		for i, f := range keep {
			items[i] = ledger.DiscardItem{Idx: f.Idx, File: f.File, Ino: f.Ino, MsgID: f.MsgID, Reason: f.Reason, ContentHash: f.ContentHash, Size: f.Size}
		}
		c.Discarded, err = discard.RunChunk(ctx, s.Dir, s.Ledger, lc, items, by, note, to)
	}
	if errors.Is(err, ErrState) {
		// Cancelled meanwhile (no other run can have moved the cursor: it
		// is read under the lock); nothing of this chunk was begun.
		c.Changed = nil
		c.Task, err = s.Get(ctx, t.ID)
		return c, false, err
	}
	if err != nil {
		return c, false, err
	}
	c.Task, err = s.Get(ctx, t.ID)
	return c, true, err
}
