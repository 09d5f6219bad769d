package fsck

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/report"
)

// WriteText writes r for people: a line per finding ("KIND: TEXT",
// "info " before an informational one, then "; e.g. " and its examples),
// and the verdict: ok, or how many kinds of problem were found and that
// command (the fsck command line for the queue) --repair fixes what it
// can.
func (r *Report) WriteText(w io.Writer, command string) {
	for _, f := range r.Findings {
		line := fmt.Sprintf("%s: %s", f.Kind, f.Text)
		if f.Info {
			line = "info " + line
		}
		if len(f.Examples) > 0 {
			ex := make([]string, len(f.Examples))
			for i, x := range f.Examples {
				ex[i] = report.Terminal(x)
			}
			line += "; e.g. " + strings.Join(ex, ", ")
		}
		fmt.Fprintln(w, line)
	}
	if n := r.Problems(); n > 0 {
		kinds := "kinds"
		if n == 1 {
			kinds = "kind"
		}
		fmt.Fprintf(w, "fsck %s: %d %s of problem found (%s --repair fixes what it can)\n", report.Terminal(r.Queue), n, kinds, report.Terminal(command))
	} else {
		fmt.Fprintf(w, "fsck %s: ok\n", report.Terminal(r.Queue))
	}
}

// MissingLedger reports the SQLite ledger file path of the queue d, when
// it is missing or empty, as the finding ledger-missing, without creating
// it: every file of done/ and error/ lacks its record, and command
// (the fsck command line) --repair rebuilds it. named says the command
// line named the file (--db), which may then be wrong. It returns nil
// when the file is there, or when it cannot tell (the open names the
// error).
func MissingLedger(d *queue.Dir, path string, named bool, command string) *Report {
	fi, err := os.Stat(path)
	state := "does not exist"
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err == nil && fi.Mode().IsRegular() && fi.Size() == 0:
		state = "is an empty file"
	default:
		return nil // there, or an error the open will name
	}
	done, _ := d.Count(queue.Done)
	bad, _ := d.Count(queue.Error)
	return &Report{Queue: d.Path(), Findings: []Finding{{
		Kind: "ledger-missing", Count: done + bad,
		Text: fmt.Sprintf("the ledger %s %s%s: %d files in done/ and %d in error/ have no record; %s%s --repair rebuilds it",
			path, state, map[bool]string{true: " (is --db right?)"}[named], done, bad,
			map[bool]string{true: "only if --db is right, "}[named], command),
	}}}
}
