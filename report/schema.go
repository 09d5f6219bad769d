package report

import (
	"cmp"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/queue"
)

// The roles SchemaRow.Role reports for the contract's fields.
const (
	RoleIdempotencyKey = "idempotency-key"
	RoleSequence       = "sequence"
	RoleOrderKey       = "order-key"
)

// SchemaRow is one field of the inferred schema: a line of `spool schema`.
type SchemaRow struct {
	Field string
	// Type is the field's JSON type over every valid message that has it:
	// string, integer, number, boolean, object or array. A field holding
	// both integers and decimals is number. Nulls are ignored, so a field
	// that is sometimes null keeps its other type; a field that is only ever
	// null is "null". Any other mix lists the kinds joined by "|" in the
	// fixed order of KindOrder, e.g. "string|number".
	Type string
	// Role is RoleIdempotencyKey, RoleSequence or RoleOrderKey for the
	// contract's key, seq and order fields, and empty for every other field.
	Role string
}

// KindOrder is the order in which a mixed type lists its kinds: the order
// in which package spool declares them.
var KindOrder = []spool.Kind{
	spool.KindString, spool.KindInteger, spool.KindNumber,
	spool.KindBoolean, spool.KindObject, spool.KindArray,
}

// firstSeen is where a field first appeared: the smallest file name that has
// it, and its position among that file's top-level keys. Keeping only the
// minimum makes the field order independent of readdir order without
// sorting, or even holding, the list of files.
type firstSeen struct {
	file  string
	pos   int
	kinds map[spool.Kind]bool
}

func (f *firstSeen) before(file string, pos int) bool {
	return cmp.Or(strings.Compare(file, f.file), cmp.Compare(pos, f.pos)) < 0
}

// Schema infers the schema of the valid messages waiting in inbox/: the
// union of their top-level fields, each with its type and contract role.
// Fields are ordered by first appearance, taking the files in name order and
// each file's keys in document order. Files are read as `spool consume`
// would inspect them, without claiming: a message that is not a regular
// file, is over the contract's size limit, fails to parse or validate, or
// is consumed while Schema runs is skipped. Memory is bounded by the number
// of distinct fields, not of files.
func Schema(ctx context.Context, d *queue.Dir, c spool.Contract) ([]SchemaRow, error) {
	fields := map[string]*firstSeen{}
	err := d.List(queue.Inbox, func(e queue.Entry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.Regular() {
			return nil
		}
		data, err := d.ReadEntry(queue.Inbox, e, c.Limit())
		var tooLarge *queue.TooLargeError
		switch {
		case errors.Is(err, queue.ErrNotRegular), errors.As(err, &tooLarge), errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		}
		m, err := c.Parse(data)
		var rej *spool.RejectError
		switch {
		case errors.As(err, &rej):
			return nil
		case err != nil:
			return err
		}
		for pos, f := range m.Fields {
			s, ok := fields[f.Name]
			if !ok {
				s = &firstSeen{file: e.Name, pos: pos, kinds: map[spool.Kind]bool{}}
				fields[f.Name] = s
			} else if s.before(e.Name, pos) {
				s.file, s.pos = e.Name, pos
			}
			s.kinds[kindOf(c, m, f)] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	rows := make([]SchemaRow, 0, len(fields))
	for name, s := range fields {
		rows = append(rows, SchemaRow{Field: name, Type: typeOf(s.kinds), Role: role(c, name)})
	}
	slices.SortFunc(rows, func(a, b SchemaRow) int {
		fa, fb := fields[a.Field], fields[b.Field]
		return cmp.Or(strings.Compare(fa.file, fb.file), cmp.Compare(fa.pos, fb.pos))
	})
	return rows, nil
}

// kindOf is a field's kind for the schema. The contract's amount field is
// money whether it arrives as a JSON number or as a numeric string (the
// contract accepts both and stores the digits as written), so a numeric
// string there is typed by its digits, not reported as a string.
func kindOf(c spool.Contract, m *spool.Message, f spool.Field) spool.Kind {
	if f.Name != c.AmountField || f.Kind != spool.KindString || m.Amount == "" {
		return f.Kind
	}
	if strings.ContainsAny(string(m.Amount), ".eE") {
		return spool.KindNumber
	}
	return spool.KindInteger
}

// typeOf names the type of a set of kinds; see SchemaRow.Type.
func typeOf(kinds map[spool.Kind]bool) string {
	if kinds[spool.KindInteger] && kinds[spool.KindNumber] {
		delete(kinds, spool.KindInteger)
	}
	var names []string
	for _, k := range KindOrder {
		if kinds[k] {
			names = append(names, string(k))
		}
	}
	if len(names) == 0 {
		return string(spool.KindNull)
	}
	return strings.Join(names, "|")
}

func role(c spool.Contract, field string) string {
	switch field {
	case c.KeyField:
		return RoleIdempotencyKey
	case c.SeqField:
		return RoleSequence
	case c.OrderField:
		return RoleOrderKey
	}
	return ""
}

// WriteSchemaCSV writes rows as CSV with the header field,type,role.
func WriteSchemaCSV(w io.Writer, rows []SchemaRow) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"field", "type", "role"}); err != nil {
		return err
	}
	for _, r := range rows {
		if err := cw.Write(terminalAll([]string{r.Field, r.Type, r.Role})); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
