package main

import (
	"context"
	"flag"
	"io"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/report"
	"github.com/spoolq/spool/task"
)

var auditCommand = &command{
	name:    "audit",
	args:    "DIR [--since T] [--json] [-o FILE] [--db PATH]",
	summary: "who did what to the queue and its ledger: every operator action, oldest first",
	help: `
Lists every operator action that changed the queue or its ledger, oldest
first (in the order they were recorded): replay (and the finishing of an
interrupted one), flush, fsck --repair (action repair), prune, a ledger
bound to its queue for the first time (bind) or started empty on purpose
(new-ledger), discard (and the finishing of an interrupted one), a
task's approve, cancel and run, backup, and each refusal of a replay,
a discard or a task's action. Each row says who (the OS user, or
--by where the command takes it), how (via cli), what (the action, and
its selection as JSON: names, --reason, --all, the files it resolved to),
its counts (selected, done, skipped...), and how it ended: ok, failed
(with the error), interrupted, refused.

An action writes its row before it changes anything and its outcome
after. A row still without an outcome whose process is gone from this
host is shown as "interrupted (no outcome: process gone)": the tool was
killed; the next audited command run on this host records it so. One
whose process runs, or of another host, is "started (no outcome yet)".

--since T keeps the rows begun at or after T: an RFC 3339 time
(2026-03-01T10:00:00Z) or a duration ago (90m, 24h, 7d).

--json prints one JSON array of objects with the keys id, at, ended_at
(RFC 3339 UTC; null while no outcome), duration_s (seconds; null while
none), actor, role, via, action, selection (the JSON object as recorded),
counts, outcome (as recorded), shown (interrupted for a started row whose
process is gone), recorded (false while started), detail, host, pid and
task (null when none).

Only reads: it works for a user who may read the queue and its ledger
but not write them.`,
	opts: newOpts[auditOpts],
}

// auditOpts are spool audit's.
type auditOpts struct {
	reportOpts
	sinceFlag *string
	since     time.Time
}

func (o *auditOpts) flags(fs *flag.FlagSet) {
	o.sinceFlag = fs.String("since", "", "only the actions begun at or after `T`: an RFC 3339 time, or a duration ago (24h, 7d)")
	o.bind(fs, "one JSON array of objects")
}

func (o *auditOpts) validate(e *env, pos []string) (err error) {
	if err := o.reportOpts.validate(e, pos); err != nil {
		return err
	}
	if e.given("since") {
		if o.since, err = queueopen.ParseSince(*o.sinceFlag, time.Now()); err != nil {
			return e.usage("--since: %v", err)
		}
	}
	return nil
}

func (o *auditOpts) run(ctx context.Context, e *env) (err error) {
	_, l, done, err := openBound(ctx, o.dir, *o.db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	rows, err := l.Audit().List(ctx, ledger.AuditQuery{Since: o.since})
	if err != nil {
		return err
	}
	entries := make([]report.AuditEntry, len(rows))
	for i, r := range rows {
		entries[i] = report.AuditEntry{AuditRow: r, Gone: r.Outcome == ledger.AuditStarted && task.ProcessGone(r.Host, r.PID)}
	}
	return e.output(*o.out, func(w io.Writer) error {
		if *o.asJSON {
			return report.WriteAuditJSON(w, entries)
		}
		return report.WriteAuditTable(w, entries)
	})
}
