package main

import (
	"context"
	"flag"
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
	opts: newOpts[replaysOpts],
}

// replaysOpts are spool replays's.
type replaysOpts struct{ reportOpts }

func (o *replaysOpts) flags(fs *flag.FlagSet) { o.bind(fs, "one JSON array of objects") }

func (o *replaysOpts) run(ctx context.Context, e *env) (err error) {
	_, l, done, err := openBound(ctx, o.dir, *o.db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	rs, err := l.Replays().List(ctx)
	if err != nil {
		return err
	}
	return e.output(*o.out, func(w io.Writer) error {
		if *o.asJSON {
			return report.WriteReplaysJSON(w, rs)
		}
		return report.WriteReplaysCSV(w, rs)
	})
}
