package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/task"
)

// An operator action that changes the queue or the ledger is audited
// (docs/DESIGN.md, "Audit"): beginAudit writes its row as started before
// the action changes anything, and auditRun.end sets how it ended. A
// command that cannot write the row does not act. Replays and discards
// (their requests, approvals, cancels, runs and finishings) are audited
// by package task's Service alone, not here.

// auditRun is one audited action under way.
type auditRun struct {
	l  *ledger.DB
	id int64
	// Counts are the action's counts so far, recorded by end.
	Counts ledger.AuditCounts
	// Detail, when set, is recorded by end on success (a summary).
	Detail string
}

// auditEntry is the row of an action on the command line by actor ("" for
// the OS user), with selection marshalled as JSON (nil for {}).
func auditEntry(actor, action string, selection any) (ledger.AuditEntry, error) {
	if actor == "" {
		actor = osUser()
	}
	e := ledger.AuditEntry{Actor: actor, Via: ledger.AuditCLI, Action: action, Host: queue.Host(), PID: os.Getpid()}
	if selection != nil {
		b, err := json.Marshal(selection)
		if err != nil {
			return e, fmt.Errorf("audit %s: selection: %w", action, err)
		}
		e.Selection = string(b)
	}
	return e, nil
}

// cliAudit is the entry Bind audits a first bind with: the OS user on
// the command line, this process.
func cliAudit() ledger.AuditEntry {
	e, _ := auditEntry("", ledger.AuditBind, nil) // a nil selection does not fail
	return e
}

// beginAudit closes the rows that killed runs on this host left started
// (task.CloseInterrupted), then writes the row of action as started and
// returns the run to end. actor "" is the OS user.
func beginAudit(ctx context.Context, e *env, l *ledger.DB, actor, action string, selection any) (*auditRun, error) {
	entry, err := auditEntry(actor, action, selection)
	if err != nil {
		return nil, err
	}
	task.CloseInterrupted(ctx, l, e.cmd.name)
	id, err := l.Audit().Begin(ctx, entry)
	if err != nil {
		return nil, fmt.Errorf("%w (nothing was changed: an action is not done unaudited)", err)
	}
	return &auditRun{l: l, id: id, Counts: ledger.AuditCounts{}}, nil
}

// end records how the action ended, from *err, its result: ok (also for
// errCheckFailed, a finding the output shows, such as a named msg_id
// that waits for no retry), interrupted when ctx was cancelled (a
// signal), failed otherwise, with the error as detail. It runs past a
// cancelled ctx. A failure to record is returned when the action itself
// succeeded, and warned of otherwise.
func (r *auditRun) end(ctx context.Context, e *env, err *error) {
	outcome, detail := ledger.AuditOK, r.Detail
	switch {
	case *err == nil || errors.Is(*err, errCheckFailed):
	case ctx.Err() != nil || errors.Is(*err, context.Canceled):
		outcome, detail = ledger.AuditInterrupted, oneLine((*err).Error())
	default:
		outcome, detail = ledger.AuditFailed, oneLine((*err).Error())
	}
	if eerr := r.l.Audit().End(context.WithoutCancel(ctx), r.id, outcome, r.Counts, detail); eerr != nil {
		if *err == nil {
			*err = eerr
		} else {
			e.warn("%v", eerr)
		}
	}
}

// Audit actions of the commands (ledger.AuditBind and
// ledger.AuditNewLedger are Bind's).
const (
	auditFlush  = "flush"
	auditRepair = "repair"
	auditPrune  = "prune"
	auditBackup = "backup"
)
