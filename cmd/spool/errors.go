package main

import (
	"context"
	"flag"
	"io"

	"github.com/spoolq/spool/report"
)

var errorsCommand = &command{
	name:    "errors",
	args:    "DIR [-o FILE] [--detail | --long | --json | --group-by reason] [--format csv|table] [--db PATH]",
	summary: "CSV file,reason of the dead letters in error/; --long, --json, --group-by reason for more",
	opts:    newOpts[errorsOpts],
}

// errorsOpts are spool errors's: the list, or one of its views.
type errorsOpts struct {
	reportOpts
	detail, long    *bool
	groupBy, format *string
	// table: the list as a table, not CSV.
	table bool
}

func (o *errorsOpts) flags(fs *flag.FlagSet) {
	o.detail = fs.Bool("detail", false, "add the columns field,detail to the CSV")
	o.long = fs.Bool("long", false, "a readable table with attempts, times, consumer and history")
	o.groupBy = fs.String("group-by", "", "`reason`: CSV reason,count,first,last, most frequent first")
	o.format = fs.String("format", "", "`csv` or table, for the list and --detail (default: with --detail, table at a terminal, csv elsewhere)")
	o.bind(fs, "one JSON array of objects with every recorded field")
}

func (o *errorsOpts) validate(e *env, pos []string) error {
	if err := o.reportOpts.validate(e, pos); err != nil {
		return err
	}
	views := 0
	for _, on := range []bool{*o.detail, *o.long, *o.asJSON, *o.groupBy != ""} {
		if on {
			views++
		}
	}
	if views > 1 {
		return e.usage("--detail, --long, --json and --group-by are exclusive")
	}
	if *o.groupBy != "" && *o.groupBy != "reason" {
		return e.usage("--group-by %q: only reason is supported", *o.groupBy)
	}
	o.table = *o.detail && *o.out == "" && isTerminal(e.stdout)
	switch {
	case e.given("format") && (*o.long || *o.asJSON || *o.groupBy != ""):
		return e.usage("--format is for the list and --detail, not --long, --json or --group-by")
	case *o.format == "table":
		o.table = true
	case *o.format == "csv":
		o.table = false
	case e.given("format"):
		return e.usage("--format %q: want csv or table", *o.format)
	}
	return nil
}

func (o *errorsOpts) run(ctx context.Context, e *env) (err error) {
	d, l, done, err := openBound(ctx, o.dir, *o.db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	rows, err := report.Errors(ctx, d, l)
	if err != nil {
		return err
	}
	return e.output(*o.out, func(w io.Writer) error {
		switch {
		case *o.long:
			return report.WriteErrorsLong(w, rows)
		case *o.asJSON:
			return report.WriteErrorsJSON(w, rows)
		case *o.groupBy != "":
			return report.WriteReasonGroupsCSV(w, report.GroupByReason(rows))
		}
		if o.table {
			return report.WriteErrorsTable(w, rows, *o.detail)
		}
		return report.WriteErrorsCSV(w, rows, *o.detail)
	})
}
