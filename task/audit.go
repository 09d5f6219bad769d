package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// The Service is the one writer of the audit rows of replays and
// discards, their approvals, cancels and runs, and of the finishing of
// interrupted ones (docs/DESIGN.md, "Audit"): an action begins its row
// (begin) before it changes anything and closes it (close, ended) after;
// a refusal is one closed row (refuse, Refuse). The command line and the
// console call the Service and write none of these rows themselves.

// entry is the audit entry of an action of who, for the requester by
// ("" for who), on task (0 for none), with selection sel (nil for {}):
// Identity.AuditEntry, but a requester other than who is the actor, and
// who is kept as os_user.
func (s *Service) entry(who Identity, by, action string, task int64, sel map[string]any) ledger.AuditEntry {
	if by != "" && by != who.Name {
		if sel == nil {
			sel = map[string]any{}
		}
		sel["os_user"] = who.Name
		who.Name = by
	}
	var selection any
	if sel != nil {
		selection = sel
	}
	e, _ := who.AuditEntry(action, selection, s.Host, s.PID) // maps of plain data always marshal
	e.Task = task
	return e
}

// requestSelection is the audit's selection of a request: what was
// asked, and (p not nil) what it resolved to.
func requestSelection(req Request, p *Preview) map[string]any {
	sel := map[string]any{}
	b, _ := json.Marshal(req.Selection) // plain data always marshals
	_ = json.Unmarshal(b, &sel)
	if req.Note != "" {
		sel["note"] = req.Note
	}
	if req.Force {
		sel["force"] = true
	}
	if req.To != "" {
		sel["to"] = req.To
	}
	if req.Rate > 0 {
		sel["rate"] = req.Rate
	}
	if p != nil {
		sel["files"], sel["digest"] = p.Count, p.Digest
	}
	return sel
}

// refuse audits a refusal of who's action on task (0 for none) and
// returns err (joined with the audit's failure if it could not be
// written).
func (s *Service) refuse(ctx context.Context, who Identity, action string, task int64, sel map[string]any, err error) error {
	return s.refuseCounts(ctx, who, action, task, sel, nil, err)
}

func (s *Service) refuseCounts(ctx context.Context, who Identity, action string, task int64, sel map[string]any, counts ledger.AuditCounts, err error) error {
	if _, aerr := s.Ledger.Audit().Record(context.WithoutCancel(ctx), s.entry(who, "", action, task, sel), ledger.AuditRefused, counts, err.Error()); aerr != nil {
		return errors.Join(err, fmt.Errorf("audit %s: %w", action, aerr))
	}
	return err
}

// begin closes the rows killed runs on this host left started
// (CloseInterrupted), then writes the started row of who's action on
// task (0 for none) and returns its id. The action must not go on when it
// fails.
func (s *Service) begin(ctx context.Context, who Identity, action string, task int64, sel map[string]any) (int64, error) {
	CloseInterrupted(ctx, s.Ledger, action)
	id, err := s.Ledger.Audit().Begin(ctx, s.entry(who, "", action, task, sel))
	if err != nil {
		return 0, fmt.Errorf("%s: %w (nothing was changed: an action is not done unaudited)", action, err)
	}
	return id, nil
}

// close closes row aid of an action that err ended: ok with detail;
// refused when err is ErrState (the task moved on meanwhile);
// interrupted when ctx is done; failed otherwise, err's text the detail.
// It returns err, joined with the audit's failure.
func (s *Service) close(ctx context.Context, aid int64, counts ledger.AuditCounts, detail string, err error) error {
	outcome := ledger.AuditOK
	switch {
	case errors.Is(err, ErrState):
		outcome, detail = ledger.AuditRefused, err.Error()
	case err != nil && ctx.Err() != nil:
		outcome, detail = ledger.AuditInterrupted, err.Error()
	case err != nil:
		outcome, detail = ledger.AuditFailed, err.Error()
	}
	return s.closeAs(ctx, aid, outcome, counts, detail, err)
}

// closeAs closes row aid with outcome, counts and detail, and returns
// err joined with the audit's failure.
func (s *Service) closeAs(ctx context.Context, aid int64, outcome string, counts ledger.AuditCounts, detail string, err error) error {
	if aerr := s.Ledger.Audit().End(context.WithoutCancel(ctx), aid, outcome, counts, detail); aerr != nil {
		err = errors.Join(err, fmt.Errorf("audit: %w", aerr))
	}
	return err
}

// requested writes the closed row of who's request req (for by),
// resolved to p and recorded as task id, with detail.
func (s *Service) requested(ctx context.Context, who Identity, by string, req Request, p Preview, id int64, detail string) error {
	_, err := s.Ledger.Audit().Record(ctx, s.entry(who, by, string(req.Kind), id, requestSelection(req, &p)), ledger.AuditOK, s.requestCounts(req, p), detail)
	return err
}

// CloseInterrupted records as interrupted the audit rows still started
// whose process is gone from this host (ProcessGone): an action killed
// before it recorded its outcome. by names the action that found them,
// in the row's detail. It is best effort: a row it cannot read or close
// is left as it is (spool audit still shows it interrupted), and the
// action that calls it goes on.
func CloseInterrupted(ctx context.Context, l *ledger.DB, by string) {
	rows, err := l.Audit().List(ctx, ledger.AuditQuery{Outcome: ledger.AuditStarted})
	if err != nil {
		return
	}
	for _, r := range rows {
		if !ProcessGone(r.Host, r.PID) {
			continue
		}
		detail := fmt.Sprintf("process %d on %s ended without an outcome; found by %s (pid %d)", r.PID, r.Host, by, os.Getpid())
		_ = l.Audit().End(ctx, r.ID, ledger.AuditInterrupted, r.Counts, detail) // closed meanwhile: ErrAuditClosed, fine
	}
}

// ProcessGone reports whether the process pid of host is known to be
// gone: host is this one (queue.Host, as the rows name it) and no process
// has that pid. A process of another user (EPERM) is alive; on another
// host nothing is known.
func ProcessGone(host string, pid int) bool {
	if pid <= 0 || host == "" || host != queue.Host() {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
