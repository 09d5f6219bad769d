package main

import (
	"context"
	"flag"
	"io"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/report"
)

var orderCheckCommand = &command{
	name:    "order-check",
	args:    "DIR [-o FILE] [--sql | --json] [--db PATH]",
	summary: "OK, or CSV order_no,seq,problem of sequence gaps and duplicates (exit 1)",
	opts:    newOpts[orderCheckOpts],
}

// orderCheckOpts are spool order-check's: DIR, or with --sql none.
type orderCheckOpts struct {
	reportOpts
	sql *bool
}

func (o *orderCheckOpts) flags(fs *flag.FlagSet) {
	o.sql = fs.Bool("sql", false, "print the order-check SQL instead of running it")
	o.bind(fs, `one JSON object {"ok": bool, "problems": [{"order_no", "seq", "problem"}]}`)
}

func (o *orderCheckOpts) validate(e *env, pos []string) error {
	if *o.sql {
		return e.positionals(pos, 0, 1, "DIR")
	}
	return o.reportOpts.validate(e, pos)
}

func (o *orderCheckOpts) run(ctx context.Context, e *env) (err error) {
	if *o.sql {
		return e.output(*o.out, func(w io.Writer) error {
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
	if err := e.output(*o.out, func(w io.Writer) (err error) {
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
