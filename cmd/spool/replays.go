package main

import (
	"context"
	"io"

	"github.com/spoolq/spool/report"
)

var replaysCommand = &command{
	name:    "replays",
	args:    "DIR [-o FILE] [--json] [--db PATH]",
	summary: "the replay history: CSV at,file,new_name,by,note, oldest first",
	help: `
Prints every replay the ledger recorded, oldest first (in the order they
were recorded), as CSV with the header at,file,new_name,by,note: when
(RFC 3339 UTC), the name in error/, the name it got in inbox/, who replayed
it (--by, or the OS user) and why (--note).

--json prints one JSON array instead, with the keys at, file, new_name, ino,
by and note (null when none was given).`,
}

func init() { replaysCommand.run = runReplays }

func runReplays(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	out := addOutputFlag(flags)
	asJSON := flags.Bool("json", false, "one JSON array of objects")
	db := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	_, l, done, err := openBound(ctx, pos[0], *db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	rs, err := l.Replays().List(ctx)
	if err != nil {
		return err
	}
	return e.output(*out, func(w io.Writer) error {
		if *asJSON {
			return report.WriteReplaysJSON(w, rs)
		}
		return report.WriteReplaysCSV(w, rs)
	})
}
