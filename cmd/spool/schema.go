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
	help: `
Infers the schema of the valid messages waiting in inbox/ (read in place,
never claimed; invalid ones are skipped): the union of their top-level
fields, as CSV with the header field,type,role. On a queue of batch files
(spool.conf's format: CSV, JSON Lines, XML) each record of the files
waiting counts as a message; a CSV record's fields are strings, except a
seq of digits (integer). In every format the amount field is typed by its
digits (integer or number) whether written as a number or a string, as
the contract reads money.

type is string, integer, number (integers and decimals mixed), boolean,
object or array; nulls are ignored, a field that is only ever null is null,
and any other mix lists its kinds joined by | in that order (string|number).
role is idempotency-key, order-key or sequence for the contract's fields.
Fields appear in order of first appearance, files taken in name order.

The contract comes from DIR/spool.conf and the contract flags. --db is
accepted for symmetry with the other commands and not used.`,
	opts: newOpts[schemaOpts],
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
