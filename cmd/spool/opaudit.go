package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// opAudit is the audit row (ledger.AuditBegin) of one operator action run
// on the command line: written as started before the action changes
// anything, closed with its outcome and counts after.
type opAudit struct {
	l  *ledger.DB
	id int64
}

// beginOpAudit writes the started row of action by the OS user, with
// selection marshalled as its JSON selection. When it fails the action
// must not go on.
func beginOpAudit(ctx context.Context, l *ledger.DB, action string, selection any) (*opAudit, error) {
	sel, err := json.Marshal(selection)
	if err != nil {
		return nil, fmt.Errorf("audit %s: %w", action, err)
	}
	id, err := l.AuditBegin(ctx, ledger.AuditEntry{Actor: osUser(), Via: ledger.AuditCLI, Action: action,
		Selection: string(sel), Host: queue.Host(), PID: os.Getpid()})
	if err != nil {
		return nil, fmt.Errorf("audit %s: %w", action, err)
	}
	return &opAudit{l: l, id: id}, nil
}

// end closes the row: ok when *err is nil; interrupted when the action
// stopped at a signal (ctx done); failed, with the error, otherwise. An
// error closing the row becomes *err when there was none.
func (a *opAudit) end(ctx context.Context, err *error, counts ledger.AuditCounts) {
	outcome, detail := ledger.AuditOK, ""
	switch {
	case *err != nil && ctx.Err() != nil && errors.Is(*err, ctx.Err()):
		outcome, detail = ledger.AuditInterrupted, (*err).Error()
	case *err != nil:
		outcome, detail = ledger.AuditFailed, (*err).Error()
	}
	// Recorded even after a signal cancelled the action's context.
	if cerr := a.l.AuditEnd(context.WithoutCancel(ctx), a.id, outcome, counts, detail); cerr != nil && *err == nil {
		*err = fmt.Errorf("audit: %w", cerr)
	}
}
