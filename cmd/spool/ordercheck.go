package main

import (
	"context"
	"io"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/report"
)

var orderCheckCommand = &command{
	name:    "order-check",
	args:    "DIR [-o FILE] [--sql | --json] [--db PATH]",
	summary: "OK, or CSV order_no,seq,problem of sequence gaps and duplicates (exit 1)",
	help: `
Checks the sequences of the processed messages, per order: they start at 1,
with no gap and no seq shared by two msg_ids. Prints OK and exits 0 when all
is well; otherwise prints CSV with the header order_no,seq,problem, one row
per problem (duplicate: two msg_ids share the seq; missing: the seq, or a
run from-to, is absent), and exits 1.

--json prints one object instead: {"ok": true|false, "problems":
[{"order_no", "seq", "problem"}, ...]}, with the same exit status.

--sql prints the portable query instead (it runs unchanged in sqlite3 and
psql); DIR is then optional and need not exist.`,
}

func init() { orderCheckCommand.run = runOrderCheck }

func runOrderCheck(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	out := addOutputFlag(flags)
	sql := flags.Bool("sql", false, "print the order-check SQL instead of running it")
	asJSON := flags.Bool("json", false, `one JSON object {"ok": bool, "problems": [{"order_no", "seq", "problem"}]}`)
	db := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if *sql {
		if err := e.positionals(pos, 0, 1, "DIR"); err != nil {
			return err
		}
		return e.output(*out, func(w io.Writer) error {
			_, err := io.WriteString(w, ledger.OrderCheckSQL)
			return err
		})
	}
	if err := e.positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	_, l, done, err := openBound(ctx, pos[0], *db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	problems, err := l.Messages().OrderCheck(ctx)
	if err != nil {
		return err
	}
	ok := true
	if err := e.output(*out, func(w io.Writer) (err error) {
		if *asJSON {
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
