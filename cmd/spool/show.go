package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"time"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/report"
)

var showCommand = &cmdline.Command{
	Name:    "show",
	Args:    "DIR MSG_ID|FILE [--json] [--db PATH]",
	Summary: "one message's story: where it is now, its ledger record, deliveries, retry and replays",
	Options: cmdline.New[showOpts],
}

// showOpts are spool show's: the queue and a message's msg_id or file.
type showOpts struct {
	dirOpts
	what   string
	asJSON *bool
}

func (o *showOpts) Flags(fs *flag.FlagSet) {
	o.asJSON = fs.Bool("json", false, "one JSON object (see above)")
	o.dirOpts.Flags(fs)
}

func (o *showOpts) Validate(e *env, pos []string) error {
	if err := e.Positionals(pos, 2, 2, "DIR", "MSG_ID or FILE"); err != nil {
		return err
	}
	o.dir, o.what = pos[0], pos[1]
	return nil
}

func (o *showOpts) Run(ctx context.Context, e *env) (err error) {
	d, l, done, err := openBound(ctx, o.dir, *o.db, ledgerOpts{use: readLedger})
	if err != nil {
		return err
	}
	defer done(&err)
	m, err := report.Story(ctx, d, l, o.what)
	if err != nil {
		return err
	}
	if !m.Found() {
		return &inputError{path: report.Shown(o.what), err: errors.New("the queue knows nothing of it (no ledger record, no file of that name)")}
	}
	now := time.Now()
	if *o.asJSON {
		return output(e, "", func(w io.Writer) error { return report.WriteJSON(w, m.JSON(now)) })
	}
	return output(e, "", func(w io.Writer) error { return report.WriteStory(w, m, now) })
}
