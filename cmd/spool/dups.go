package main

import (
	"context"
	"io"

	"github.com/spoolq/spool/report"
)

var dupsCommand = &command{
	name:    "dups",
	args:    "DIR [-o FILE] [--db PATH]",
	summary: "the msg_ids ignored as duplicates, distinct and ascending, one a line",
	help: `
Prints every msg_id that was delivered again after being processed, once
each, in ascending byte order, one a line. Nothing when there were none.`,
}

func init() { dupsCommand.run = runDups }

func runDups(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	out := addOutputFlag(flags)
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
	ids, err := l.Duplicates(ctx)
	if err != nil {
		return err
	}
	return e.output(*out, func(w io.Writer) error { return report.WriteDups(w, ids) })
}
