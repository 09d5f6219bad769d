package task

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/spoolq/spool/discard"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/replay"
)

// This file is the one runner of replays and discards: chunk begins each
// chunk's move (ledger.Tasks.BeginChunk, or Tasks.Start for Do's first)
// and finish hands it to package replay or discard, which move the files
// (replay.Finish, discard.Finish). Everything runs on the caller's
// goroutine, one chunk at a time, each under the queue's replay lock
// (lock), which also finishes, audited, what killed runs left.

// MaxChunk is the most files of one chunk of a task with a rate: one
// replay intent or discard batch, one transaction to begin it and one to
// finish it. At a rate, a chunk is about a tenth of a second's files (at
// least one), so that a cancel is taken within about that. A task
// without a rate moves its whole set as one chunk.
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

// RunOptions are the callbacks of Do and Run; each may be nil. They are
// called from the caller's goroutine.
type RunOptions struct {
	// OnPreview is given Do's request resolved, before anything is
	// recorded (also when it selected nothing).
	OnPreview func(Preview)
	// OnStart is given the task Do recorded to run at once, before its
	// first file moves.
	OnStart func(Task)
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
		if err := s.Ledger.Tasks().Move(ctx, id, ledger.TaskTransition{From: []string{t.State}, To: StateRunning, By: who.Name}); err != nil && !errors.Is(err, ErrState) {
			return t, err
		}
	case StateRunning:
	default:
		return t, s.refuse(ctx, who, action, id, sel, fmt.Errorf("task %d is %s: %w", id, t.State, ErrState))
	}
	aid, err := s.begin(ctx, who, action, id, sel)
	if err != nil {
		return t, err
	}
	start := t
	defer func() {
		t, err = s.ended(ctx, aid, id, ledger.AuditCounts{"selected": int64(start.Files)}, start, err)
	}()
	var to *queue.Target
	if t.Request.To != "" {
		if to, err = s.Dir.OpenTarget(t.Request.To); err != nil {
			return t, fmt.Errorf("task %d: to %w", id, err)
		}
		defer func() {
			if cerr := to.Close(); err == nil {
				err = cerr
			}
		}()
	}
	return s.chunks(ctx, who, t, to, newPace(t.Request.Rate, t.Files), opt)
}

// ended closes audit row aid of a run of task id (Run's, or Do's) that
// err ended, with counts and what the task did since start (done,
// missing, changed): ok; interrupted when ctx is done or the task was
// cancelled meanwhile; failed otherwise, the task then marked failed if
// still running, for a later Run to resume from its cursor. It returns
// the task as it is now, and err joined with the audit's failure.
func (s *Service) ended(ctx context.Context, aid, id int64, counts ledger.AuditCounts, start Task, err error) (Task, error) {
	end := context.WithoutCancel(ctx)
	t, gerr := s.Get(end, id)
	if gerr != nil {
		return t, errors.Join(err, gerr)
	}
	counts["done"], counts["missing"], counts["changed"] = int64(t.Done-start.Done), int64(t.Missing-start.Missing), int64(t.Changed-start.Changed)
	outcome, detail := ledger.AuditOK, fmt.Sprintf("task %d %s: %d of %d files begun", id, t.State, t.Next, t.Files)
	switch {
	case err != nil && ctx.Err() != nil:
		outcome, detail = ledger.AuditInterrupted, err.Error()
	case err != nil:
		outcome, detail = ledger.AuditFailed, err.Error()
		if merr := s.Ledger.Tasks().Move(end, id, ledger.TaskTransition{From: []string{StateRunning}, To: StateFailed, Detail: err.Error()}); merr == nil {
			t.State = StateFailed
		}
	case t.State == StateCancelled:
		outcome = ledger.AuditInterrupted
	}
	return t, s.closeAs(ctx, aid, outcome, counts, detail, err)
}

// pace is the chunk size of a task and, at a rate, what paces its chunks.
type pace struct {
	size int
	lim  *rate.Limiter
}

// newPace is the pace of a task of files files at r files a second (0:
// the whole set in one chunk, unpaced).
func newPace(r float64, files int) pace {
	if r <= 0 {
		return pace{size: max(1, files)}
	}
	size := max(1, min(MaxChunk, int(r/10)))
	return pace{size: size, lim: rate.NewLimiter(rate.Limit(r), size)}
}

// wait waits for the next chunk's turn, or for ctx.
func (p pace) wait(ctx context.Context) error {
	if p.lim == nil {
		return ctx.Err()
	}
	return p.lim.WaitN(ctx, p.size)
}

// chunks runs the chunks of running task t at pace pc until it is done,
// cancelled or fails, and returns it.
func (s *Service) chunks(ctx context.Context, who Identity, t Task, to *queue.Target, pc pace, opt RunOptions) (Task, error) {
	for {
		if t.Next < t.Files {
			if err := pc.wait(ctx); err != nil {
				return t, err
			}
		} else if err := ctx.Err(); err != nil {
			return t, err
		}
		c, more, err := s.chunk(ctx, who, t, pc.size, to, opt)
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
func (s *Service) chunk(ctx context.Context, who Identity, t Task, size int, to *queue.Target, opt RunOptions) (c Chunk, more bool, err error) {
	unlock, err := s.lock(ctx, who, opt)
	if err != nil {
		return c, false, err
	}
	defer func() {
		if uerr := unlock(); err == nil && uerr != nil {
			err = uerr
		}
	}()
	if c.Task, err = s.Get(ctx, t.ID); err != nil {
		return c, false, err
	}
	t = c.Task
	if t.State != StateRunning {
		return c, false, nil
	}
	if t.Next >= t.Files {
		// Every chunk begun, and finished above.
		if err := s.Ledger.Tasks().Move(ctx, t.ID, ledger.TaskTransition{From: []string{StateRunning}, To: StateDone}); err != nil && !errors.Is(err, ErrState) {
			return c, false, err
		}
		c.Task, err = s.Get(ctx, t.ID)
		return c, false, err
	}
	files, err := s.Ledger.Tasks().Files(ctx, t.ID, t.Next, t.Next+size)
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
	if len(keep) == 0 {
		err = s.Ledger.Tasks().Advance(ctx, lc)
	} else {
		var m ledger.TaskMove
		if m, err = s.taskMove(t, keep, to); err == nil {
			var id int64
			if id, err = s.Ledger.Tasks().BeginChunk(ctx, lc, m); err == nil {
				err = s.finish(ctx, id, m, to, &c)
			}
		}
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

// taskMove is the move of files, a chunk of task t: by its requester,
// with its note (and who approved it), to to for a discard.
func (s *Service) taskMove(t Task, files []ledger.TaskFile, to *queue.Target) (ledger.TaskMove, error) {
	m := ledger.TaskMove{Kind: string(t.Kind), By: t.By, Note: t.Request.Note, At: time.Now()}
	if t.ApprovedBy != "" {
		m.Note = fmt.Sprintf("task %d, approved by %s", t.ID, t.ApprovedBy)
		if t.Request.Note != "" {
			m.Note = t.Request.Note + " (" + m.Note + ")"
		}
	}
	if to != nil {
		m.ToDir = to.Path()
	}
	for _, f := range files {
		if err := queue.CheckName(f.File); err != nil {
			return m, fmt.Errorf("%s: %w", t.Kind, err)
		}
		if t.Kind == Replay {
			m.Replay = append(m.Replay, ledger.ReplayItem{Idx: f.Idx, File: f.File, Ino: f.Ino})
		} else {
			m.Discard = append(m.Discard, ledger.DiscardItem{Idx: f.Idx, File: f.File, Ino: f.Ino, MsgID: f.MsgID, Reason: f.Reason,
				ContentHash: f.ContentHash, Size: f.Size})
		}
	}
	return m, nil
}

// finish moves the files of move m, begun as id: replay.Finish or
// discard.Finish, whose records it puts in c.
func (s *Service) finish(ctx context.Context, id int64, m ledger.TaskMove, to *queue.Target, c *Chunk) (err error) {
	if m.Kind == string(Replay) {
		c.Replays, err = replay.Finish(ctx, s.Dir, s.Ledger, ledger.ReplayIntent{ID: id, By: m.By, Note: m.Note, Created: m.At,
			State: ledger.IntentPending, Items: m.Replay})
		return err
	}
	c.Discarded, err = discard.Finish(ctx, s.Dir, s.Ledger, ledger.DiscardBatch{ID: id, By: m.By, Note: m.Note, Created: m.At,
		State: ledger.IntentPending, ToDir: m.ToDir, Items: m.Discard}, to)
	return err
}

// lock takes the queue's replay lock and finishes the replays and
// discards killed runs left unfinished, each finishing audited as an
// action of who (finishInterrupted) and reported through opt, so that
// what follows sees error/ as they leave it. It returns the function that
// releases the lock; on error the lock is released already.
func (s *Service) lock(ctx context.Context, who Identity, opt RunOptions) (func() error, error) {
	unlock, err := s.Dir.LockReplays(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.finishInterrupted(ctx, who, opt, true); err != nil {
		if uerr := unlock(); uerr != nil {
			err = errors.Join(err, fmt.Errorf("unlock replays: %w", uerr))
		}
		return nil, err
	}
	return unlock, nil
}

// FinishReplays finishes the replays that killed runs left unfinished
// (replay.ResumeLocked) under the queue's replay lock, as one audited
// action of who (action replay, selection {"resume": [intent ids]}),
// reporting each through opt.OnResumed. A consumer calls it before it
// claims anything: a replay's files are on their way to inbox/ (a
// discard's wait, hidden in error/, for the next task or fsck --repair).
func (s *Service) FinishReplays(ctx context.Context, who Identity, opt RunOptions) error {
	unlock, err := s.Dir.LockReplays(ctx)
	if err != nil {
		return err
	}
	err = s.finishInterrupted(ctx, who, opt, false)
	if uerr := unlock(); err == nil && uerr != nil {
		err = fmt.Errorf("unlock replays: %w", uerr)
	}
	return err
}

// finishInterrupted finishes the replays (and with discards, the
// discards) that killed runs left unfinished (replay.ResumeLocked,
// discard.ResumeLocked), each kind's finishing one audited action of who
// (action replay or discard, selection {"resume": [the ids]}), reporting
// each through opt's OnResumed and OnResumedDiscard. The caller holds the
// replay lock.
func (s *Service) finishInterrupted(ctx context.Context, who Identity, opt RunOptions, discards bool) error {
	intents, err := s.Ledger.Replays().Unfinished(ctx)
	if err != nil {
		return err
	}
	if len(intents) > 0 {
		ids := make([]int64, len(intents))
		for i, in := range intents {
			ids[i] = in.ID
		}
		aid, err := s.begin(ctx, who, string(Replay), 0, map[string]any{"resume": ids})
		if err != nil {
			return err
		}
		finished, err := replay.ResumeLocked(ctx, s.Dir, s.Ledger)
		counts := ledger.AuditCounts{"intents": int64(len(finished)), "selected": 0, "done": 0}
		for _, f := range finished {
			counts["selected"] += int64(len(f.Intent.Items))
			counts["done"] += int64(len(f.Replays))
			if opt.OnResumed != nil {
				opt.OnResumed(f)
			}
		}
		if err := s.close(ctx, aid, counts, fmt.Sprintf("finished %d replays interrupted before", len(finished)), err); err != nil {
			return err
		}
	}
	if !discards {
		return nil
	}
	batches, err := s.Ledger.Discards().Unfinished(ctx)
	if err != nil || len(batches) == 0 {
		return err
	}
	ids := make([]int64, len(batches))
	for i, b := range batches {
		ids[i] = b.ID
	}
	aid, err := s.begin(ctx, who, string(Discard), 0, map[string]any{"resume": ids})
	if err != nil {
		return err
	}
	finished, err := discard.ResumeLocked(ctx, s.Dir, s.Ledger)
	counts := ledger.AuditCounts{"batches": int64(len(finished)), "selected": 0, "done": 0, "missing": 0}
	for _, b := range finished {
		for _, it := range b.Items {
			counts["selected"]++
			if it.Outcome == ledger.DiscardMissing {
				counts["missing"]++
			} else {
				counts["done"]++
			}
		}
		if opt.OnResumedDiscard != nil {
			opt.OnResumedDiscard(b)
		}
	}
	return s.close(ctx, aid, counts, fmt.Sprintf("finished %d discards interrupted before", len(finished)), err)
}
