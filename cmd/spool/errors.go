package main

import (
	"context"
	"flag"
	"io"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/report"
)

var errorsCommand = &cmdline.Command{
	Name:    "errors",
	Args:    "DIR [-o FILE] [--detail | --long | --json | --group-by reason] [--format csv|table] [--db PATH]",
	Summary: "CSV file,reason of the dead letters in error/; --long, --json, --group-by reason for more",
	Options: cmdline.New[errorsOpts],
}

// errorsOpts are spool errors's: the list, or one of its views.
type errorsOpts struct {
	reportOpts
	detail, long    *bool
	groupBy, format *string
	// table: the list as a table, not CSV.
	table bool
}

func (o *errorsOpts) Flags(fs *flag.FlagSet) {
	o.detail = fs.Bool("detail", false, "add the columns field,detail to the CSV")
	o.long = fs.Bool("long", false, "a readable table with attempts, times, consumer and history")
	o.groupBy = fs.String("group-by", "", "`reason`: CSV reason,count,first,last, most frequent first")
	o.format = fs.String("format", "", "`csv` or table, for the list and --detail (default: with --detail, table at a terminal, csv elsewhere)")
	o.bind(fs, "one JSON array of objects with every recorded field")
}

func (o *errorsOpts) Validate(e *env, pos []string) error {
	if err := o.reportOpts.Validate(e, pos); err != nil {
		return err
	}
	views := 0
	for _, on := range []bool{*o.detail, *o.long, *o.asJSON, *o.groupBy != ""} {
		if on {
			views++
		}
	}
	if views > 1 {
		return e.Usage("--detail, --long, --json and --group-by are exclusive")
	}
	if *o.groupBy != "" && *o.groupBy != "reason" {
		return e.Usage("--group-by %q: only reason is supported", *o.groupBy)
	}
	o.table = *o.detail && *o.out == "" && isTerminal(e.Stdout)
	switch {
	case e.Given("format") && (*o.long || *o.asJSON || *o.groupBy != ""):
		return e.Usage("--format is for the list and --detail, not --long, --json or --group-by")
	case *o.format == "table":
		o.table = true
	case *o.format == "csv":
		o.table = false
	case e.Given("format"):
		return e.Usage("--format %q: want csv or table", *o.format)
	}
	return nil
}

func (o *errorsOpts) Run(ctx context.Context, e *env) (err error) {
	d, l, done, err := openBound(ctx, o.dir, *o.db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	rows, err := report.Errors(ctx, d, l)
	if err != nil {
		return err
	}
	return output(e, *o.out, func(w io.Writer) error {
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
