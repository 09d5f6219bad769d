package main

import (
	"context"
	"flag"
	"io"

	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/report"
)

var schemaCommand = &command{
	name:    "schema",
	args:    "DIR [-o FILE] [--json] [contract flags]",
	summary: "CSV field,type,role of the valid messages waiting in inbox/",
	opts:    newOpts[schemaOpts],
}

// schemaOpts are spool schema's.
type schemaOpts struct {
	reportOpts
	cf *contractFlags
}

func (o *schemaOpts) flags(fs *flag.FlagSet) {
	o.bind(fs, "one JSON array of {field, type, role} objects")
	o.cf = addContractFlags(fs)
}

func (o *schemaOpts) run(ctx context.Context, e *env) (err error) {
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
	rows, err := report.Schema(ctx, d, c, files)
	if err != nil {
		return err
	}
	return e.output(*o.out, func(w io.Writer) error {
		if *o.asJSON {
			return report.WriteSchemaJSON(w, rows)
		}
		return report.WriteSchemaCSV(w, rows)
	})
}
