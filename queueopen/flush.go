package queueopen

import (
	"context"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/task"
)

// AuditFlush is the audit action of a flush.
const AuditFlush = "flush"

// Audited says who acts for an audited action of the library (Flush,
// Prune): Who is the audit row's actor, via, host and pid (its Action
// and Selection are the action's), By names the command that closes a
// killed run's row (task.BeginAction), and Warn, if set, is told of a
// failure to end the row of an action that failed, whose own error is
// returned.
type Audited struct {
	Who  ledger.AuditEntry
	By   string
	Warn func(error)
}

// begin writes the row of action with selection sel (nil: none) as
// started.
func (a Audited) begin(ctx context.Context, l *ledger.DB, action string, sel any) (*task.Action, error) {
	e := a.Who
	e.Action = action
	e, err := e.Select(sel)
	if err != nil {
		return nil, err
	}
	return task.BeginAction(ctx, l, e, a.By)
}

// end ends run with err, the action's result, returning the failure to
// record when the action succeeded and telling Warn of it otherwise.
func (a Audited) end(ctx context.Context, run *task.Action, err error) error {
	switch eerr := run.End(ctx, err, false); {
	case eerr == nil:
	case err == nil:
		return eerr
	case a.Warn != nil:
		a.Warn(eerr)
	}
	return err
}

// RunAudited runs act as the audited action of a named action, with
// selection sel (nil: none), on the ledger l: its row is written as
// started first, and an action whose row cannot be written does not run;
// then the row ends with act's result and the counts act set on run. It
// returns act's error, or the failure to end the row when act succeeded.
// For a program's own audited actions (spool backup); the library's are
// audited inside (Flush, Prune, Fsck's repair).
func RunAudited(ctx context.Context, l *ledger.DB, a Audited, action string, sel any, act func(run *task.Action) error) error {
	run, err := a.begin(ctx, l, action, sel)
	if err != nil {
		return err
	}
	return a.end(ctx, run, act(run))
}

// Flush makes the retries waiting for their time in the ledger of the
// queue at dir (opened for writing as o says) due now: those of ids, or
// every one when ids is empty, their attempt counts kept
// (ledger.Messages.FlushRetries). It is an audited action: its row
// (selection all, or the msg_ids) is written before, and ends with the
// counts done, selected and missing. onFlushed, if set, hears the
// msg_ids flushed and those of ids that wait for no retry, before the row
// ends (whose failure Flush then returns); a msg_id missing is a
// finding, not an error.
func Flush(ctx context.Context, dir string, o Options, a Audited, ids []string, onFlushed func(flushed, missing []string)) (err error) {
	o.Use = Write
	d, l, err := openBound(ctx, dir, o)
	if err != nil {
		return err
	}
	defer closeBound(d, l, &err)
	var sel any = map[string]any{"all": true}
	if len(ids) > 0 {
		sel = map[string]any{"msg_ids": ids}
	}
	run, err := a.begin(ctx, l, AuditFlush, sel)
	if err != nil {
		return err
	}
	flushed, err := l.Messages().FlushRetries(ctx, ids, time.Now())
	if err != nil {
		return a.end(ctx, run, err)
	}
	run.Counts["done"] = int64(len(flushed))
	if len(ids) > 0 {
		run.Counts["selected"] = int64(len(ids))
		run.Counts["missing"] = int64(len(ids) - len(flushed))
	}
	got := map[string]bool{}
	for _, id := range flushed {
		got[id] = true
	}
	var missing []string
	for _, id := range ids {
		if !got[id] {
			missing = append(missing, id)
		}
	}
	if onFlushed != nil {
		onFlushed(flushed, missing)
	}
	return a.end(ctx, run, nil)
}
