package main

import (
	"context"
	"flag"
	"io"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/report"
)

var dupsCommand = &cmdline.Command{
	Name:    "dups",
	Args:    "DIR [-o FILE] [--conflicts] [--json] [--db PATH]",
	Summary: "the msg_ids ignored as duplicates, distinct and ascending, one a line",
	Options: cmdline.New[dupsOpts],
}

// dupsOpts are spool dups's.
type dupsOpts struct {
	reportOpts
	conflicts *bool
}

func (o *dupsOpts) Flags(fs *flag.FlagSet) {
	o.conflicts = fs.Bool("conflicts", false, "CSV of the redeliveries whose body differs; exit 1 when there is one")
	o.bind(fs, "one JSON array: of msg_id strings, or with --conflicts of objects with the CSV's keys")
}

func (o *dupsOpts) Run(ctx context.Context, e *env) (err error) {
	_, l, done, err := openBound(ctx, o.dir, *o.db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	if *o.conflicts {
		cs, err := l.Messages().Conflicts(ctx)
		if err != nil {
			return err
		}
		if err := output(e, *o.out, func(w io.Writer) error {
			if *o.asJSON {
				return report.WriteConflictsJSON(w, cs)
			}
			return report.WriteConflictsCSV(w, cs)
		}); err != nil {
			return err
		}
		if len(cs) > 0 {
			return errCheckFailed
		}
		return nil
	}
	ids, err := l.Messages().Duplicates(ctx)
	if err != nil {
		return err
	}
	return output(e, *o.out, func(w io.Writer) error {
		if *o.asJSON {
			return report.WriteDupsJSON(w, ids)
		}
		return report.WriteDups(w, ids)
	})
}
