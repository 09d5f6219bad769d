package report

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// ReasonUnknown is the reason reported for a file in error/ that the ledger
// has no dead-letter record of, e.g. one an operator dropped in by hand.
const ReasonUnknown = "unknown"

// ErrorRow is one dead letter sitting in error/.
type ErrorRow struct {
	// File is its name in error/.
	File string
	// Reason is the recorded reason (parse, missing-field, ...), or
	// ReasonUnknown when the ledger has no record of this file.
	Reason string
	// Field names the offending field, when the record has one.
	Field string
	// Detail is the recorded one-line explanation.
	Detail string
	// At is when the consumer inspected it; zero when unknown.
	At time.Time
}

// Errors lists every message in error/, sorted by name, with the reason
// the ledger recorded for it. The record is found by inode, because a
// dead letter may have been stored under a suffixed name; a record whose
// file name does not match is one of an earlier file that had the same
// inode, and does not count.
func Errors(ctx context.Context, d *queue.Dir, l *ledger.DB) ([]ErrorRow, error) {
	var entries []queue.Entry
	if err := d.List(queue.Error, func(e queue.Entry) error {
		entries = append(entries, e)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("errors report: %w", err)
	}
	slices.SortFunc(entries, func(a, b queue.Entry) int { return strings.Compare(a.Name, b.Name) })
	rows := make([]ErrorRow, 0, len(entries))
	for _, e := range entries {
		dl, ok, err := l.DeadLetterByIno(ctx, e.Ino)
		if err != nil {
			return nil, fmt.Errorf("errors report: %s: %w", e.Name, err)
		}
		if !ok || !sameMessage(e.Name, dl.File) {
			rows = append(rows, ErrorRow{File: e.Name, Reason: ReasonUnknown, Detail: "no dead-letter record in the ledger"})
			continue
		}
		rows = append(rows, ErrorRow{File: e.Name, Reason: string(dl.Reason), Field: dl.Field, Detail: dl.Detail, At: dl.At})
	}
	return rows, nil
}

// sameMessage reports whether stored, a name in error/, is the file a
// record names: the same name, or that name with the collision suffix
// ("a~2.json" for "a.json") that a move into a stage may add, possibly
// with the stem shortened to fit the file-name limit.
func sameMessage(stored, recorded string) bool {
	// The ledger stores file names made valid UTF-8 without NUL.
	stored = strings.ReplaceAll(strings.ToValidUTF8(stored, "\uFFFD"), "\x00", "\uFFFD")
	if stored == recorded {
		return true
	}
	stem, ok := strings.CutSuffix(stored, ".json")
	if !ok {
		return false
	}
	i := strings.LastIndexByte(stem, '~')
	if i < 0 || i == len(stem)-1 || strings.Trim(stem[i+1:], "0123456789") != "" {
		return false
	}
	return strings.HasPrefix(strings.TrimSuffix(recorded, ".json"), stem[:i])
}

// WriteErrorsCSV writes rows as CSV with the header file,reason; with
// detail it adds the columns field and detail.
func WriteErrorsCSV(w io.Writer, rows []ErrorRow, detail bool) error {
	cw := csv.NewWriter(w)
	header := []string{"file", "reason"}
	if detail {
		header = append(header, "field", "detail")
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, r := range rows {
		rec := []string{r.File, r.Reason}
		if detail {
			rec = append(rec, r.Field, oneLine(r.Detail))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// oneLine keeps a CSV record on one line, so `wc -l` and line-based tools
// still count records.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
