package task

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/replay"
)

// Approve approves waiting task id as who, so that Run may run it. It is
// refused, audited (action "approve") and nothing changed, when who's
// role is below RoleApprover (ErrForbidden), who is the person who asked
// for the task in any realm (SamePerson: ErrOwnRequest, whatever the
// role), the task is not waiting (ErrState)
// or unknown (ErrNotFound), or a file of its set changed since the
// request (a *StaleError naming each): the set is checked against error/
// under the replay lock, each file by name, inode and body hash.
func (s *Service) Approve(ctx context.Context, who Identity, id int64) (Task, error) {
	const action = "approve"
	if who.Role < RoleApprover {
		return Task{}, s.refuse(ctx, who, action, id, nil, fmt.Errorf("%s as %s may not approve task %d: approver needed: %w", who.Name, roleName(who.Role), id, ErrForbidden))
	}
	t, err := s.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Task{}, s.refuse(ctx, who, action, 0, map[string]any{"task": id}, err)
	}
	if err != nil {
		return Task{}, err
	}
	sel := map[string]any{"task": id, "kind": t.Kind, "files": t.Files, "digest": t.Digest, "by": t.By}
	switch {
	case t.State != StateWaiting:
		return t, s.refuse(ctx, who, action, id, sel, fmt.Errorf("task %d is %s, not waiting for approval: %w", id, t.State, ErrState))
	case ownRequest(who, t):
		return t, s.refuse(ctx, who, action, id, sel, fmt.Errorf("task %d was asked by %s: %w", id, t.By, ErrOwnRequest))
	}
	changed, err := s.changed(ctx, id, 0, t.Files, true)
	if err != nil {
		return t, err
	}
	if len(changed) > 0 {
		err := &StaleError{Task: id, Files: t.Files, Changed: changed}
		return t, s.refuseCounts(ctx, who, action, id, sel, ledger.AuditCounts{"selected": int64(t.Files), "changed": int64(len(changed))}, err)
	}
	// Audited before it is approved: an approval is not given unaudited.
	aid, err := s.Ledger.AuditBegin(ctx, s.entry(who, action, id, sel))
	if err != nil {
		return t, fmt.Errorf("approve task %d: %w (nothing was changed: an action is not done unaudited)", id, err)
	}
	counts := ledger.AuditCounts{"selected": int64(t.Files)}
	err = s.Ledger.MoveTask(ctx, id, ledger.TaskTransition{From: []string{StateWaiting}, To: StateApproved, By: who.Name})
	return s.ended(ctx, aid, id, counts, fmt.Sprintf("task %d approved, asked by %s", id, t.By), err)
}

// ended closes audit row aid of an action on task id that err ended
// (nil: ok with detail; ErrState: refused, the task moved on meanwhile;
// otherwise failed), and returns the task as it is now.
func (s *Service) ended(ctx context.Context, aid, id int64, counts ledger.AuditCounts, detail string, err error) (Task, error) {
	outcome := ledger.AuditOK
	switch {
	case errors.Is(err, ErrState):
		outcome, detail = ledger.AuditRefused, err.Error()
	case err != nil:
		outcome, detail = ledger.AuditFailed, err.Error()
	}
	if aerr := s.Ledger.AuditEnd(context.WithoutCancel(ctx), aid, outcome, counts, detail); aerr != nil {
		err = errors.Join(err, aerr)
	}
	t, gerr := s.Get(ctx, id)
	if err == nil {
		err = gerr
	}
	return t, err
}

// changed checks the files of task id with from <= Idx < to against
// error/ and returns those that changed, with why. lock takes the replay
// lock for the time it reads (a caller that holds it passes false).
func (s *Service) changed(ctx context.Context, id int64, from, to int, lock bool) (_ []ledger.TaskFile, err error) {
	if lock {
		unlock, _, err := replay.Lock(ctx, s.Dir, s.Ledger)
		if err != nil {
			return nil, err
		}
		defer func() {
			if uerr := unlock(); err == nil && uerr != nil {
				err = uerr
			}
		}()
	}
	files, err := s.Ledger.TaskFiles(ctx, id, from, to)
	if err != nil {
		return nil, err
	}
	var out []ledger.TaskFile
	for _, f := range files {
		why, err := s.check(f)
		if err != nil {
			return nil, err
		}
		if why != "" {
			f.ChangedWhy = why
			out = append(out, f)
		}
	}
	return out, nil
}

// check says why f is no longer in error/ as the task's set has it ("" if
// it is): gone (replayed, discarded, renamed) or another file under its
// name, or its body changed (fixed).
func (s *Service) check(f ledger.TaskFile) (string, error) {
	hash, size, err := s.Dir.HashFile(queue.Error, f.File, f.Ino)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "gone from error/ or replaced by another file", nil
	case err != nil:
		return "", fmt.Errorf("check %s: %w", f.File, err)
	case hash != f.ContentHash || size != f.Size:
		return "its body changed", nil
	}
	return "", nil
}

// Cancel cancels task id as who: a waiting or approved task will never
// run; a running one stops after the chunk under way, which finishes
// (each file moved and recorded, or still in error/ under its name). It
// is refused, audited (action "cancel"), when who's role is below
// RoleOperator (ErrForbidden), the task is done, cancelled or failed, or
// running with every file in a chunk begun (its last chunk, or the one
// move of a replay or discard run at once: all or nothing) (ErrState), or
// unknown (ErrNotFound).
func (s *Service) Cancel(ctx context.Context, who Identity, id int64) (Task, error) {
	const action = "cancel"
	if who.Role < RoleOperator {
		return Task{}, s.refuse(ctx, who, action, id, nil, fmt.Errorf("%s as %s may not cancel task %d: operator needed: %w", who.Name, roleName(who.Role), id, ErrForbidden))
	}
	t, err := s.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Task{}, s.refuse(ctx, who, action, 0, map[string]any{"task": id}, err)
	}
	if err != nil {
		return Task{}, err
	}
	sel := map[string]any{"task": id, "kind": t.Kind, "files": t.Files, "by": t.By}
	switch t.State {
	case StateWaiting, StateApproved, StateRunning:
	default:
		return t, s.refuse(ctx, who, action, id, sel, fmt.Errorf("task %d is %s: %w", id, t.State, ErrState))
	}
	if t.State == StateRunning && t.Next >= t.Files {
		// Its last chunk (or its one move: a replay or discard run at
		// once) is begun, and finishes all or nothing.
		return t, s.refuse(ctx, who, action, id, sel, fmt.Errorf("task %d: every file is in a move already under way, which finishes all or nothing: nothing left to cancel: %w", id, ErrState))
	}
	aid, err := s.Ledger.AuditBegin(ctx, s.entry(who, action, id, sel))
	if err != nil {
		return t, fmt.Errorf("cancel task %d: %w (nothing was changed: an action is not done unaudited)", id, err)
	}
	err = s.Ledger.MoveTask(ctx, id, ledger.TaskTransition{From: []string{StateWaiting, StateApproved, StateRunning},
		To: StateCancelled, By: who.Name, Detail: "cancelled by " + who.Name})
	if errors.Is(err, ErrState) {
		// Finished or cancelled meanwhile.
		if now, gerr := s.Get(ctx, id); gerr == nil {
			err = fmt.Errorf("task %d is %s: %w", id, now.State, ErrState)
		}
	}
	now, err := s.ended(ctx, aid, id, ledger.AuditCounts{"selected": int64(t.Files), "begun": int64(t.Next)},
		fmt.Sprintf("task %d cancelled, was %s", id, t.State), err)
	return now, err
}
