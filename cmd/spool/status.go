package main

import (
	"context"
	"io"

	"github.com/spoolq/spool/report"
)

var statusCommand = &command{
	name:    "status",
	args:    "DIR [--db PATH]",
	summary: "human summary: messages per stage, oldest waiting, ledger counts, dead letters by reason",
	help: `
Prints, for people, the messages in each stage, how long the oldest message
has waited in inbox/, and what the ledger holds: processed rows, duplicate
deliveries and dead letters by reason. Scripts should use lag, dups, errors
and order-check, whose output is stable.`,
}

func init() { statusCommand.run = runStatus }

func runStatus(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	db := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	d, l, done, err := openBound(ctx, pos[0], *db, ledgerOpts{use: readLedger})
	if err != nil {
		return err
	}
	defer done(&err)
	r, err := report.Status(ctx, d, l)
	if err != nil {
		return err
	}
	return e.output("", func(w io.Writer) error { return report.WriteStatus(w, r) })
}
