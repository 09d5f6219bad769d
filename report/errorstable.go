package report

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteErrorsTable writes rows for people at a terminal: the columns
// file, reason and detail aligned, the field the detail is about before
// it ("amount: required field is missing"). Scripts read WriteErrorsCSV,
// whose columns do not move.
func WriteErrorsTable(w io.Writer, rows []ErrorRow, detail bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if detail {
		fmt.Fprintf(tw, "file\treason\tdetail\n")
	} else {
		fmt.Fprintf(tw, "file\treason\n")
	}
	for _, r := range rows {
		if !detail {
			fmt.Fprintf(tw, "%s\t%s\n", Terminal(r.File), Terminal(r.Reason))
			continue
		}
		d := oneLine(r.Detail)
		if r.Field != "" {
			d = r.Field + ": " + d
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", Terminal(r.File), Terminal(r.Reason), Terminal(d))
	}
	return tw.Flush()
}
