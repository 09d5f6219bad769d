package task

import (
	"context"
	"errors"
	"fmt"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/report"
)

// Action is one audited operator action that changes the queue or its
// ledger and is no task (a flush, a repair, a prune, a backup: docs/
// DESIGN.md, "Audit"): BeginAction writes its row as started before the
// action changes anything, and End sets how it ended. An action whose row
// cannot be written is not done. Replays and discards are audited by the
// Service alone.
type Action struct {
	l  *ledger.DB
	id int64
	// Counts are the action's counts so far, recorded by End.
	Counts ledger.AuditCounts
	// Detail, when set, is recorded by End on success (a summary).
	Detail string
}

// BeginAction closes the rows that killed runs on this host left started
// (CloseInterrupted, naming by as the one that found them), then writes
// e as started and returns the action to end. A row that cannot be
// written is an error that says nothing was changed.
func BeginAction(ctx context.Context, l *ledger.DB, e ledger.AuditEntry, by string) (*Action, error) {
	CloseInterrupted(ctx, l, by)
	id, err := l.Audit().Begin(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("%w (nothing was changed: an action is not done unaudited)", err)
	}
	return &Action{l: l, id: id, Counts: ledger.AuditCounts{}}, nil
}

// End records how the action ended with err: ok when err is nil or a
// finding (finding: the output shows it, as a named msg_id that waits for
// no retry), interrupted when ctx was cancelled (a signal), failed
// otherwise, with the error on one line (report.OneLine) as its detail.
// It runs past a cancelled ctx, and returns the failure to record.
func (a *Action) End(ctx context.Context, err error, finding bool) error {
	outcome, detail := ledger.AuditOK, a.Detail
	switch {
	case err == nil || finding:
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		outcome, detail = ledger.AuditInterrupted, report.OneLine(err.Error())
	default:
		outcome, detail = ledger.AuditFailed, report.OneLine(err.Error())
	}
	return a.l.Audit().End(context.WithoutCancel(ctx), a.id, outcome, a.Counts, detail)
}
