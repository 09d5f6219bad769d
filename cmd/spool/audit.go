package main

import (
	"context"
	"flag"
	"io"
	"time"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/report"
	"github.com/spoolq/spool/task"
)

var auditCommand = &cmdline.Command{
	Name:    "audit",
	Args:    "DIR [--since T] [--json] [-o FILE] [--db PATH]",
	Summary: "who did what to the queue and its ledger: every operator action, oldest first",
	Options: cmdline.New[auditOpts],
}

// auditOpts are spool audit's.
type auditOpts struct {
	reportOpts
	sinceFlag *string
	since     time.Time
}

func (o *auditOpts) Flags(fs *flag.FlagSet) {
	o.sinceFlag = fs.String("since", "", "only the actions begun at or after `T`: an RFC 3339 time, or a duration ago (24h, 7d)")
	o.bind(fs, "one JSON array of objects")
}

func (o *auditOpts) Validate(e *env, pos []string) (err error) {
	if err := o.reportOpts.Validate(e, pos); err != nil {
		return err
	}
	if e.Given("since") {
		if o.since, err = queueopen.ParseSince(*o.sinceFlag, time.Now()); err != nil {
			return e.Usage("--since: %v", err)
		}
	}
	return nil
}

func (o *auditOpts) Run(ctx context.Context, e *env) (err error) {
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
	return output(e, *o.out, func(w io.Writer) error {
		if *o.asJSON {
			return report.WriteAuditJSON(w, entries)
		}
		return report.WriteAuditTable(w, entries)
	})
}
