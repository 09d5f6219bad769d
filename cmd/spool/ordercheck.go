package main

import (
	"context"
	"flag"
	"io"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/report"
)

var orderCheckCommand = &cmdline.Command{
	Name:    "order-check",
	Args:    "DIR [-o FILE] [--sql | --json] [--db PATH]",
	Summary: "OK, or CSV order_no,seq,problem of sequence gaps and duplicates (exit 1)",
	Options: cmdline.New[orderCheckOpts],
}

// orderCheckOpts are spool order-check's: DIR, or with --sql none.
type orderCheckOpts struct {
	reportOpts
	sql *bool
}

func (o *orderCheckOpts) Flags(fs *flag.FlagSet) {
	o.sql = fs.Bool("sql", false, "print the order-check SQL instead of running it")
	o.bind(fs, `one JSON object {"ok": bool, "problems": [{"order_no", "seq", "problem"}]}`)
}

func (o *orderCheckOpts) Validate(e *env, pos []string) error {
	if *o.sql {
		return e.Positionals(pos, 0, 1, "DIR")
	}
	return o.reportOpts.Validate(e, pos)
}

func (o *orderCheckOpts) Run(ctx context.Context, e *env) (err error) {
	if *o.sql {
		return output(e, *o.out, func(w io.Writer) error {
			_, err := io.WriteString(w, ledger.OrderCheckSQL)
			return err
		})
	}
	_, l, done, err := openBound(ctx, o.dir, *o.db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	problems, err := l.Messages().OrderCheck(ctx)
	if err != nil {
		return err
	}
	ok := true
	if err := output(e, *o.out, func(w io.Writer) (err error) {
		if *o.asJSON {
			ok, err = report.WriteOrderCheckJSON(w, problems)
			return err
		}
		ok, err = report.WriteOrderCheck(w, problems)
		return err
	}); err != nil {
		return err
	}
	if !ok {
		return errCheckFailed
	}
	return nil
}
