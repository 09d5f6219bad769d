package main

import (
	"context"
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
waiting counts as a message; a CSV record's fields are text, except a
seq of digits.

type is string, integer, number (integers and decimals mixed), boolean,
object or array; nulls are ignored, a field that is only ever null is null,
and any other mix lists its kinds joined by | in that order (string|number).
role is idempotency-key, order-key or sequence for the contract's fields.
Fields appear in order of first appearance, files taken in name order.

The contract comes from DIR/spool.conf and the contract flags. --db is
accepted for symmetry with the other commands and not used.`,
}

func init() { schemaCommand.run = runSchema }

func runSchema(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	out := addOutputFlag(flags)
	asJSON := flags.Bool("json", false, "one JSON array of {field, type, role} objects")
	cf := addContractFlags(flags)
	addDBFlag(flags)
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
	c, conf, err := cf.contractFrom(pos[0])
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
	return e.output(*out, func(w io.Writer) error {
		if *asJSON {
			return report.WriteSchemaJSON(w, rows)
		}
		return report.WriteSchemaCSV(w, rows)
	})
}
