package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/task"
)

// An operator action that changes the queue or the ledger is audited
// (docs/DESIGN.md, "Audit"), as a task.Action: beginAudit writes its row
// as started before the action changes anything, and endAudit sets how it
// ended. A command that cannot write the row does not act. Replays and
// discards are audited by package task's Service alone, not here.

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

// cliAudited is who acts on the command line for the library's audited
// actions (queueopen.Audited): the OS user, this process, the command's
// name; a failure to end the row of an action that failed is warned of.
func cliAudited(e *env) queueopen.Audited {
	who, _ := auditEntry("", "", nil) // a nil selection does not fail
	return queueopen.Audited{Who: who, By: e.cmd.name, Warn: func(err error) { e.warn("%v", err) }}
}

// beginAudit begins the action of the command (task.BeginAction) by
// actor ("" for the OS user), with selection as its row's.
func beginAudit(ctx context.Context, e *env, l *ledger.DB, actor, action string, selection any) (*task.Action, error) {
	entry, err := auditEntry(actor, action, selection)
	if err != nil {
		return nil, err
	}
	return task.BeginAction(ctx, l, entry, e.cmd.name)
}

// endAudit ends a (task.Action.End) with *err, the command's result, of
// which errCheckFailed is a finding: a failure to record is returned when
// the action itself succeeded, and warned of otherwise.
func endAudit(ctx context.Context, e *env, a *task.Action, err *error) {
	if eerr := a.End(ctx, *err, errors.Is(*err, errCheckFailed)); eerr != nil {
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
	auditBackup = "backup"
)
