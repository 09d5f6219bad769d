package main

import (
	"context"
	"io"

	"github.com/spoolq/spool/report"
)

var errorsCommand = &command{
	name:    "errors",
	args:    "DIR [-o FILE] [--detail | --long | --json | --group-by reason] [--format csv|table] [--db PATH]",
	summary: "CSV file,reason of the dead letters in error/; --long, --json, --group-by reason for more",
	help: `
Lists every message in error/, sorted by name, as CSV with the header
file,reason. The reason is the one the ledger recorded (parse,
missing-field, invalid-field, not-regular, too-large, unreadable, handler,
retries-exhausted), or unknown for a file the ledger has no record of (one
dropped into error/ by hand). unreadable is a file spool could not open or
read, its errno in the detail (permission denied (EACCES)): fix its
permissions, then spool replay it. --detail adds the columns field and detail.

--detail at a terminal prints an aligned table for people instead,
file reason detail, the field before its detail ("amount: required field
is missing"), as spool demo shows it; to a pipe, a file or -o it prints
the CSV, whose columns scripts may rely on. --format csv or table chooses
either wherever it goes.

--long prints a table for people instead: file, reason, attempts, first and
last failure (UTC), the consumer that dead-lettered it (host:pid), the name
it was claimed under when that differs, how often it was replayed and
failed before (REPLAYS, PREVIOUS), and the detail. A poison message counts
one attempt, at the time it was inspected.

--json prints one JSON array with an object per file: file, original_file,
reason, field, detail, msg_id, attempts, first_failure, last_failure, at,
consumer, consumer_host, consumer_pid, ino, replays, previous_failures and
history (earlier dead letters and replays, oldest first). Times are RFC 3339
UTC; unknown values are null.

--group-by reason is the triage view: CSV reason,count,first,last, one row
per reason of the files in error/, most frequent first, with the earliest
first failure and the latest last failure.`,
}

func init() { errorsCommand.run = runErrors }

func runErrors(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	out := addOutputFlag(flags)
	detail := flags.Bool("detail", false, "add the columns field,detail to the CSV")
	long := flags.Bool("long", false, "a readable table with attempts, times, consumer and history")
	asJSON := flags.Bool("json", false, "one JSON array of objects with every recorded field")
	groupBy := flags.String("group-by", "", "`reason`: CSV reason,count,first,last, most frequent first")
	format := flags.String("format", "", "`csv` or table, for the list and --detail (default: with --detail, table at a terminal, csv elsewhere)")
	db := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	views := 0
	for _, on := range []bool{*detail, *long, *asJSON, *groupBy != ""} {
		if on {
			views++
		}
	}
	if views > 1 {
		return e.usage("--detail, --long, --json and --group-by are exclusive")
	}
	if *groupBy != "" && *groupBy != "reason" {
		return e.usage("--group-by %q: only reason is supported", *groupBy)
	}
	table := *detail && *out == "" && isTerminal(e.stdout)
	switch {
	case given(flags, "format") && (*long || *asJSON || *groupBy != ""):
		return e.usage("--format is for the list and --detail, not --long, --json or --group-by")
	case *format == "table":
		table = true
	case *format == "csv":
		table = false
	case given(flags, "format"):
		return e.usage("--format %q: want csv or table", *format)
	}
	d, l, done, err := openBound(ctx, pos[0], *db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	rows, err := report.Errors(ctx, d, l)
	if err != nil {
		return err
	}
	return e.output(*out, func(w io.Writer) error {
		switch {
		case *long:
			return report.WriteErrorsLong(w, rows)
		case *asJSON:
			return report.WriteErrorsJSON(w, rows)
		case *groupBy != "":
			return report.WriteReasonGroupsCSV(w, report.GroupByReason(rows))
		}
		if table {
			return report.WriteErrorsTable(w, rows, *detail)
		}
		return report.WriteErrorsCSV(w, rows, *detail)
	})
}
