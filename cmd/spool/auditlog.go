package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/replay"
)

// An operator action that changes the queue or the ledger is audited
// (docs/DESIGN.md, "Audit"): beginAudit writes its row as started before
// the action changes anything, and auditRun.end sets how it ended. A
// command that cannot write the row does not act.

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
// (closeInterrupted), then writes the row of action as started and
// returns the run to end. actor "" is the OS user.
func beginAudit(ctx context.Context, e *env, l *ledger.DB, actor, action string, selection any) (*auditRun, error) {
	entry, err := auditEntry(actor, action, selection)
	if err != nil {
		return nil, err
	}
	closeInterrupted(ctx, e, l)
	id, err := l.AuditBegin(ctx, entry)
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
	if eerr := r.l.AuditEnd(context.WithoutCancel(ctx), r.id, outcome, r.Counts, detail); eerr != nil {
		if *err == nil {
			*err = eerr
		} else {
			e.warn("%v", eerr)
		}
	}
}

// closeInterrupted marks interrupted the started rows whose process is
// gone from this host: a run killed before it recorded its outcome. A
// failure is only warned of: the audit of this run does not depend on it.
func closeInterrupted(ctx context.Context, e *env, l *ledger.DB) {
	rows, err := l.AuditList(ctx, ledger.AuditQuery{Outcome: ledger.AuditStarted})
	if err != nil {
		e.warn("audit: %v", err)
		return
	}
	for _, r := range rows {
		if !processGone(r.Host, r.PID) {
			continue
		}
		detail := fmt.Sprintf("process %d on %s ended without an outcome; found by %s (pid %d)", r.PID, r.Host, e.cmd.name, os.Getpid())
		if err := l.AuditEnd(ctx, r.ID, ledger.AuditInterrupted, r.Counts, detail); err != nil && !errors.Is(err, ledger.ErrAuditClosed) {
			e.warn("audit: %v", err)
		}
	}
}

// processGone reports whether the process pid of host is known to be
// gone: host is this one (queue.Host, as the rows name it) and no
// process has that pid. A process of
// another user (EPERM) is alive; on another host nothing is known.
func processGone(host string, pid int) bool {
	if pid <= 0 || host == "" {
		return false
	}
	if host != queue.Host() {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// Audit actions of the commands (ledger.AuditBind and
// ledger.AuditNewLedger are Bind's).
const (
	auditReplay = "replay"
	auditFlush  = "flush"
	auditRepair = "repair"
	auditPrune  = "prune"
	auditBackup = "backup"
)

// beginResume begins the audit of finishing the replays a killed run
// left unfinished (action replay, selection {"resume": [intent ids]}),
// before they are finished; nil when none is unfinished. Its run counts
// what add is given.
func beginResume(ctx context.Context, e *env, l *ledger.DB) (*auditRun, error) {
	intents, err := l.UnfinishedReplays(ctx)
	if err != nil || len(intents) == 0 {
		return nil, err
	}
	ids := make([]int64, len(intents))
	for i, in := range intents {
		ids[i] = in.ID
	}
	run, err := beginAudit(ctx, e, l, "", auditReplay, map[string]any{"resume": ids})
	if err != nil {
		return nil, err
	}
	run.Counts["intents"], run.Counts["selected"], run.Counts["done"] = 0, 0, 0
	return run, nil
}

// addFinished counts a finished replay in a resume's run.
func (r *auditRun) addFinished(f replay.Finished) {
	r.Counts["intents"]++
	r.Counts["selected"] += int64(len(f.Intent.Items))
	r.Counts["done"] += int64(len(f.Replays))
}

// startAudited is queueopen.Start for a consumer, with the finishing of
// interrupted replays audited (beginResume).
func startAudited(ctx context.Context, e *env, d *queue.Dir, l *ledger.DB) (err error) {
	o := startReports(e)
	run, err := beginResume(ctx, e, l)
	if err != nil {
		return err
	}
	if run != nil {
		defer run.end(ctx, e, &err)
		told := o.OnReplayFinished
		o.OnReplayFinished = func(f replay.Finished) { run.addFinished(f); told(f) }
	}
	return queueopen.Start(ctx, d, l, o)
}
