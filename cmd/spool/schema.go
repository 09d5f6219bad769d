package main

import (
	"context"
	"flag"
	"io"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/report"
)

var schemaCommand = &cmdline.Command{
	Name:    "schema",
	Args:    "DIR [-o FILE] [--json] [contract flags]",
	Summary: "CSV field,type,role of the valid messages waiting in inbox/",
	Options: cmdline.New[schemaOpts],
}

// schemaOpts are spool schema's.
type schemaOpts struct {
	reportOpts
	cf *contractFlags
}

func (o *schemaOpts) Flags(fs *flag.FlagSet) {
	o.bind(fs, "one JSON array of {field, type, role} objects")
	o.cf = addContractFlags(fs)
}

func (o *schemaOpts) Run(ctx context.Context, e *env) (err error) {
	d, err := openQueue(o.dir)
	if err != nil {
		return err
	}
	defer queueopen.CloseDir(d, &err)
	c, conf, err := o.cf.contractFrom(o.dir)
	if err != nil {
		return err
	}
	files, err := queueopen.Batch(d, conf, c)
	if err != nil {
		return err
	}
	in, err := report.Schema(ctx, d, c, files)
	if err != nil {
		return err
	}
	rows := in.Rows()
	if n, first := in.Skipped(); n > 0 && len(rows) == 0 {
		e.Warn("no message in inbox/ fits the contract: %d skipped, the first %s (the contract flags, --key --require..., name the fields)", n, first)
	}
	return output(e, *o.out, func(w io.Writer) error {
		if *o.asJSON {
			return report.WriteSchemaJSON(w, rows)
		}
		return report.WriteSchemaCSV(w, rows)
	})
}
