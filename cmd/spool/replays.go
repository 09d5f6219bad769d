package main

import (
	"context"
	"flag"
	"io"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/report"
)

var replaysCommand = &cmdline.Command{
	Name:    "replays",
	Args:    "DIR [-o FILE] [--json] [--db PATH]",
	Summary: "the replay history: CSV at,file,new_name,by,note, oldest first",
	Options: cmdline.New[replaysOpts],
}

// replaysOpts are spool replays's.
type replaysOpts struct{ reportOpts }

func (o *replaysOpts) Flags(fs *flag.FlagSet) { o.bind(fs, "one JSON array of objects") }

func (o *replaysOpts) Run(ctx context.Context, e *env) (err error) {
	_, l, done, err := openBound(ctx, o.dir, *o.db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	rs, err := l.Replays().List(ctx)
	if err != nil {
		return err
	}
	return output(e, *o.out, func(w io.Writer) error {
		if *o.asJSON {
			return report.WriteReplaysJSON(w, rs)
		}
		return report.WriteReplaysCSV(w, rs)
	})
}
