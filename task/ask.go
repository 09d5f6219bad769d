package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// admit refuses, audited, a request who may not make or that is not well
// formed: a role below RoleOperator (ErrForbidden), a *RequestError of
// Request.Check, a By over HTTP or under an approval policy, a To that
// cannot take the files. It returns the requester's name: req.By, else
// who's.
func (s *Service) admit(ctx context.Context, who Identity, req Request) (string, error) {
	action := string(req.Kind)
	if req.Kind != Replay && req.Kind != Discard {
		action = "request"
	}
	sel := requestSelection(req, nil)
	if who.Role < RoleOperator {
		err := fmt.Errorf("%s as %s may not ask for a %s: operator needed: %w", who.Name, roleName(who.Role), req.Kind, ErrForbidden)
		return "", s.refuse(ctx, who, action, 0, sel, err)
	}
	if err := req.Check(); err != nil {
		return "", s.refuse(ctx, who, action, 0, sel, err)
	}
	by := who.Name
	if req.By != "" && req.By != who.Name {
		sel["by"] = req.By
		pol, err := s.policy(ctx)
		if err != nil {
			return "", err
		}
		switch {
		case who.Via != ledger.AuditCLI:
			return "", s.refuse(ctx, who, action, 0, sel, badRequest("by", "by %s: only the command line names a requester; over HTTP it is the token's name (%s)", req.By, who.Name))
		case pol.Set:
			return "", s.refuse(ctx, who, action, 0, sel, badRequest("by", "by %s: under the approval policy the requester is the OS user who asks (%s), not another name", req.By, who.Name))
		}
		by = req.By
	}
	if err := s.checkTo(req.To); err != nil {
		return "", s.refuse(ctx, who, action, 0, sel, err)
	}
	return by, nil
}

// Create resolves req (as Preview) under the replay lock and records the
// task with its file set, asked by who: in StateWaiting when the policy
// needs an approval for it, else StateApproved, for Run. It returns the
// task and the preview it was created from. It refuses, and audits, what
// Do refuses; a selection that matches nothing fails with ErrNothing and
// records nothing. The request is audited (action the kind, with the
// task's id, closed at once) in the same call. It is the API's: the task
// then runs apart (Run).
func (s *Service) Create(ctx context.Context, who Identity, req Request) (t Task, p Preview, err error) {
	t, err = s.ask(ctx, who, req, RunOptions{OnPreview: func(r Preview) { p = r }}, false)
	return t, p, err
}

// Do asks for req as who and, when the policy needs no approval for it,
// runs it here and now: what a command line does. It refuses, audited, a
// request admit refuses, a name not in error/ (queue.ErrNotInError) or a
// reason none has (a *RequestError). Under the replay lock it finishes
// what killed runs left (as Run), resolves req (as Preview) and shows the
// preview to opt.OnPreview, then:
//
//   - nothing selected: ErrNothing, nothing recorded;
//   - an approval needed: the task is recorded waiting, as Create
//     records it, and returned;
//   - else the task is recorded running, its first chunk begun and the
//     action's audit row (action the kind, with the task's id) started,
//     in one transaction (ledger.Tasks.Start); opt.OnStart is given the
//     task before its first file moves, and the task runs to its end as
//     Run runs it, in the same audited action, closed with its counts.
//
// Without a rate the first chunk is the whole set, moved before the lock
// is let go: the move is all or nothing, and a run killed at any instant
// has either recorded nothing or left the move for the next replay,
// discard, consume or fsck --repair to finish. With a rate the later
// chunks are taken as Run takes them. It returns the task as it ended
// (or waits).
func (s *Service) Do(ctx context.Context, who Identity, req Request, opt RunOptions) (Task, error) {
	return s.ask(ctx, who, req, opt, true)
}

// ask is Create (run false) and Do (run true).
func (s *Service) ask(ctx context.Context, who Identity, req Request, opt RunOptions, run bool) (t Task, err error) {
	by, err := s.admit(ctx, who, req)
	if err != nil {
		return Task{}, err
	}
	unlock, err := s.lock(ctx, who, opt)
	if err != nil {
		return Task{}, err
	}
	defer func() {
		if unlock != nil {
			if uerr := unlock(); err == nil && uerr != nil {
				err = uerr
			}
		}
	}()
	p, err := s.resolve(ctx, req)
	if errors.Is(err, ErrBadRequest) || errors.Is(err, queue.ErrNotInError) {
		return Task{}, s.refuse(ctx, who, string(req.Kind), 0, requestSelection(req, nil), err)
	}
	if err != nil {
		return Task{}, err
	}
	if opt.OnPreview != nil {
		opt.OnPreview(p)
	}
	if p.Count == 0 {
		return Task{}, ErrNothing
	}
	rec, err := s.record(req, p, who, by)
	if err != nil {
		return Task{}, err
	}
	if p.NeedsApproval || !run {
		return s.create(ctx, who, by, req, p, rec)
	}
	var to *queue.Target
	if req.To != "" {
		if to, err = s.Dir.OpenTarget(req.To); err != nil {
			return Task{}, fmt.Errorf("to %w", err)
		}
		defer func() {
			if cerr := to.Close(); err == nil {
				err = cerr
			}
		}()
	}
	pc := newPace(req.Rate, p.Count)
	if err := pc.wait(ctx); err != nil {
		return Task{}, err
	}
	move, err := s.taskMove(Task{Kind: req.Kind, By: by, Request: req}, p.Files[:min(pc.size, p.Count)], to)
	if err != nil {
		return Task{}, err
	}
	CloseInterrupted(ctx, s.Ledger, string(req.Kind))
	started, err := s.Ledger.Tasks().Start(ctx, ledger.TaskStart{Task: rec, Files: p.Files, Move: move,
		Audit: s.entry(who, by, string(req.Kind), 0, requestSelection(req, &p))})
	if err != nil {
		return Task{}, fmt.Errorf("%s: %w (nothing was changed)", req.Kind, err)
	}
	defer func() {
		t, err = s.ended(ctx, started.Audit, started.Task, s.requestCounts(req, p), Task{}, err)
	}()
	if t, err = s.Get(ctx, started.Task); err != nil {
		return t, err
	}
	if opt.OnStart != nil {
		opt.OnStart(t)
	}
	c := Chunk{}
	if err = s.finish(ctx, started.Move, move, to, &c); err == nil {
		c.Task, err = s.Get(ctx, t.ID)
		t = c.Task
	}
	// The lock is let go before the next chunk, which takes it again.
	if uerr := unlock(); err == nil {
		err = uerr
	}
	if unlock = nil; err != nil {
		return t, err
	}
	if opt.OnChunk != nil {
		opt.OnChunk(c)
	}
	return s.chunks(ctx, who, t, to, pc, opt)
}

// create records task rec of req resolved to p, asked by who for by,
// waiting or approved as the policy says, and audits the request; the
// caller holds the lock.
func (s *Service) create(ctx context.Context, who Identity, by string, req Request, p Preview, rec ledger.TaskRecord) (Task, error) {
	detail := "approved: no approval needed"
	if p.NeedsApproval {
		rec.State = StateWaiting
		detail = fmt.Sprintf("waits for approval: %d files, over %s_over %d", p.Count, req.Kind, p.policy.over(req.Kind))
	}
	id, err := s.Ledger.Tasks().Create(ctx, rec, p.Files)
	if err != nil {
		return Task{}, err
	}
	if err := s.requested(ctx, who, by, req, p, id, fmt.Sprintf("task %d %s", id, detail)); err != nil {
		// Not left to run unaudited.
		_ = s.Ledger.Tasks().Move(context.WithoutCancel(ctx), id, ledger.TaskTransition{From: []string{StateWaiting, StateApproved},
			To: StateCancelled, By: who.Name, Detail: "its request could not be audited"})
		return Task{}, fmt.Errorf("task %d: %w (cancelled: a task is not run unaudited)", id, err)
	}
	return s.Get(ctx, id)
}

// record is the ledger's record of a task of req resolved to p, asked by
// who for by, approved at once: the caller sets another state.
func (s *Service) record(req Request, p Preview, who Identity, by string) (ledger.TaskRecord, error) {
	text, err := json.Marshal(req)
	if err != nil {
		return ledger.TaskRecord{}, fmt.Errorf("record task: %w", err)
	}
	return ledger.TaskRecord{Kind: string(req.Kind), State: StateApproved, Request: string(text), Files: p.Count,
		Digest: p.Digest, Skipped: p.Skipped, By: by, ByOS: who.OS, Role: who.auditRole(), Via: who.Via, Note: req.Note, Created: time.Now()}, nil
}

// requestCounts are the audit's counts of a request resolved to p.
func (s *Service) requestCounts(req Request, p Preview) ledger.AuditCounts {
	c := ledger.AuditCounts{"selected": int64(p.Count)}
	if req.Kind == Replay {
		c["skipped"] = int64(p.Skipped)
	}
	return c
}

// over is the policy's limit for kind.
func (p Policy) over(kind Kind) int {
	if kind == Discard {
		return p.DiscardOver
	}
	return p.ReplayOver
}
