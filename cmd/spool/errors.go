package main

import (
	"context"
	"io"

	"github.com/spoolq/spool/report"
)

var errorsCommand = &command{
	name:    "errors",
	args:    "DIR [-o FILE] [--detail] [--db PATH]",
	summary: "CSV file,reason of the dead letters in error/",
	help: `
Lists every message in error/, sorted by name, as CSV with the header
file,reason. The reason is the one the ledger recorded (parse,
missing-field, invalid-field, not-regular, too-large, ...), or unknown for a
file the ledger has no record of (one dropped into error/ by hand).
--detail adds the columns field and detail.`,
}

func init() { errorsCommand.run = runErrors }

func runErrors(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	out := addOutputFlag(flags)
	detail := flags.Bool("detail", false, "add the columns field,detail")
	db := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	d, err := openQueue(pos[0])
	if err != nil {
		return err
	}
	defer closeQueue(d, &err)
	l, err := openLedger(ctx, pos[0], *db)
	if err != nil {
		return err
	}
	defer closeLedger(l, &err)
	rows, err := report.Errors(ctx, d, l)
	if err != nil {
		return err
	}
	return e.output(*out, func(w io.Writer) error { return report.WriteErrorsCSV(w, rows, *detail) })
}
