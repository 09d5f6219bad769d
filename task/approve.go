package task

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// Review returns task id as who would approve it, and refuses, audited
// as Approve would (action "approve"), what Approve refuses whatever the
// files: a role below RoleApprover (ErrForbidden), a task not waiting
// (ErrState) or unknown (ErrNotFound), a request asked by the same person
// in any realm (SamePerson: ErrOwnRequest, whatever the role).
// A command line shows the task it returns, asks for a confirmation, and
// then calls Approve with the digest it showed; nothing is changed
// before.
func (s *Service) Review(ctx context.Context, who Identity, id int64) (Task, error) {
	t, _, err := s.mayApprove(ctx, who, id)
	return t, err
}

// mayApprove is Review, with the audit's selection of the approval.
func (s *Service) mayApprove(ctx context.Context, who Identity, id int64) (Task, map[string]any, error) {
	const action = "approve"
	if who.Role < RoleApprover {
		return Task{}, nil, s.refuse(ctx, who, action, id, nil, fmt.Errorf("%s as %s may not approve task %d: approver needed: %w", who.Name, roleName(who.Role), id, ErrForbidden))
	}
	t, err := s.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Task{}, nil, s.refuse(ctx, who, action, 0, map[string]any{"task": id}, err)
	}
	if err != nil {
		return Task{}, nil, err
	}
	sel := map[string]any{"task": id, "kind": t.Kind, "files": t.Files, "digest": t.Digest, "by": t.By}
	switch {
	case t.State != StateWaiting:
		return t, sel, s.refuse(ctx, who, action, id, sel, fmt.Errorf("task %d is %s, not waiting for approval: %w", id, t.State, ErrState))
	case ownRequest(who, t):
		return t, sel, s.refuse(ctx, who, action, id, sel, fmt.Errorf("task %d was asked by %s: %w", id, t.By, ErrOwnRequest))
	}
	return t, sel, nil
}

// Approve approves waiting task id as who, so that Run may run it.
// digest is the digest of the set who was shown (Task.Digest, as the
// approver's view printed it): an approval approves what was seen, and
// nothing else. It is refused, audited (action "approve") and nothing
// changed, for what Review refuses, for a digest not given (a
// *RequestError) or another than the task's (ErrDigest: it was given for
// another request), and when a file of the set changed since the request
// (a *StaleError naming each): the set is checked against error/ under
// the replay lock, each file by name, inode and body hash.
func (s *Service) Approve(ctx context.Context, who Identity, id int64, digest string) (Task, error) {
	const action = "approve"
	t, sel, err := s.mayApprove(ctx, who, id)
	if err != nil {
		return t, err
	}
	switch digest = strings.ToLower(strings.TrimSpace(digest)); {
	case digest == "":
		return t, s.refuse(ctx, who, action, id, sel, badRequest("digest", "digest: required: an approval names the digest of the set it approves (task %d's: sha256 %s)", id, t.Digest))
	case digest != t.Digest:
		sel["approved_digest"] = digest
		return t, s.refuse(ctx, who, action, id, sel, fmt.Errorf("task %d: the approval names set sha256 %s, the task's is sha256 %s: look at the task again and approve what it is: %w",
			id, digest, t.Digest, ErrDigest))
	}
	changed, err := s.changed(ctx, who, id, 0, t.Files)
	if err != nil {
		return t, err
	}
	if len(changed) > 0 {
		err := &StaleError{Task: id, Files: t.Files, Changed: changed}
		return t, s.refuseCounts(ctx, who, action, id, sel, ledger.AuditCounts{"selected": int64(t.Files), "changed": int64(len(changed))}, err)
	}
	// Audited before it is approved: an approval is not given unaudited.
	aid, err := s.begin(ctx, who, action, id, sel)
	if err != nil {
		return t, err
	}
	err = s.Ledger.Tasks().Move(ctx, id, ledger.TaskTransition{From: []string{StateWaiting}, To: StateApproved, By: who.Name})
	err = s.close(ctx, aid, ledger.AuditCounts{"selected": int64(t.Files)}, fmt.Sprintf("task %d approved, asked by %s", id, t.By), err)
	return s.now(ctx, id, err)
}

// now returns task id as it is now, with err (or the error reading it).
func (s *Service) now(ctx context.Context, id int64, err error) (Task, error) {
	t, gerr := s.Get(context.WithoutCancel(ctx), id)
	if err == nil {
		err = gerr
	}
	return t, err
}

// changed checks the files of task id with from <= Idx < to against
// error/, under the replay lock (taken as who), and returns those that
// changed, with why.
func (s *Service) changed(ctx context.Context, who Identity, id int64, from, to int) (_ []ledger.TaskFile, err error) {
	unlock, err := s.lock(ctx, who, RunOptions{})
	if err != nil {
		return nil, err
	}
	defer func() {
		if uerr := unlock(); err == nil && uerr != nil {
			err = uerr
		}
	}()
	files, err := s.Ledger.Tasks().Files(ctx, id, from, to)
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
// name, or its body changed (fixed). A file unreadable then and now is
// unchanged.
func (s *Service) check(f ledger.TaskFile) (string, error) {
	hash, size, err := s.Dir.HashFile(queue.Error, f.File, f.Ino)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "gone from error/ or replaced by another file", nil
	case errors.Is(err, os.ErrPermission) && f.ContentHash == "":
		return "", nil
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
// chunk of a task without a rate: all or nothing) (ErrState), or unknown
// (ErrNotFound).
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
		// Its last chunk (or its one chunk: a task without a rate) is
		// begun, and finishes all or nothing.
		return t, s.refuse(ctx, who, action, id, sel, fmt.Errorf("task %d: every file is in a move already under way, which finishes all or nothing: nothing left to cancel: %w", id, ErrState))
	}
	aid, err := s.begin(ctx, who, action, id, sel)
	if err != nil {
		return t, err
	}
	err = s.Ledger.Tasks().Move(ctx, id, ledger.TaskTransition{From: []string{StateWaiting, StateApproved, StateRunning},
		To: StateCancelled, By: who.Name, Detail: "cancelled by " + who.Name})
	if errors.Is(err, ErrState) {
		// Finished or cancelled meanwhile.
		if now, gerr := s.Get(ctx, id); gerr == nil {
			err = fmt.Errorf("task %d is %s: %w", id, now.State, ErrState)
		}
	}
	err = s.close(ctx, aid, ledger.AuditCounts{"selected": int64(t.Files), "begun": int64(t.Next)},
		fmt.Sprintf("task %d cancelled, was %s", id, t.State), err)
	return s.now(ctx, id, err)
}
