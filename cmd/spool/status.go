package main

import (
	"context"
	"flag"
	"io"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/report"
)

var statusCommand = &cmdline.Command{
	Name:    "status",
	Args:    "DIR [--json] [--db PATH]",
	Summary: "human summary: messages per stage, oldest waiting, ledger counts, dead letters by reason",
	Options: cmdline.New[statusOpts],
}

// statusOpts are spool status's.
type statusOpts struct {
	dirOpts
	asJSON *bool
}

func (o *statusOpts) Flags(fs *flag.FlagSet) {
	o.asJSON = fs.Bool("json", false, "one JSON object with every field of the report (see above)")
	o.dirOpts.Flags(fs)
}

func (o *statusOpts) Run(ctx context.Context, e *env) (err error) {
	d, l, done, err := openBound(ctx, o.dir, *o.db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	r, err := report.Status(ctx, d, l)
	if err != nil {
		return err
	}
	// A status that looks fine over a spool.conf every consumer refuses
	// says too little.
	if _, cerr := queueopen.ReadConfig(o.dir); cerr != nil {
		e.Warn("consume refuses %v. Try: spool check %s", cerr, o.dir)
	}
	if *o.asJSON {
		return output(e, "", func(w io.Writer) error { return report.WriteJSON(w, r.JSON()) })
	}
	return output(e, "", func(w io.Writer) error { return report.WriteStatus(w, r) })
}
