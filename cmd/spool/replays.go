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
	opts:    newOpts[replaysOpts],
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
