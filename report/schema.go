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
// it, the first record of that file that has it (0 for a file of one
// message), and its position among that record's top-level keys. Keeping
// only the minimum makes the field order independent of readdir order
// without sorting, or even holding, the list of files.
type firstSeen struct {
	file   string
	record int64
	pos    int
	kinds  map[spool.Kind]bool
}

// compare orders the place (file, record, pos) against f's: negative when
// it comes first.
func (f *firstSeen) compare(file string, record int64, pos int) int {
	return cmp.Or(strings.Compare(file, f.file), cmp.Compare(record, f.record), cmp.Compare(pos, f.pos))
}

// Inference infers a schema from valid messages given to it one by one:
// the union of their top-level fields, each with its type and contract
// role, ordered by first appearance (files in name order, a batch file's
// records in file order, each message's keys in document order) whatever
// order they are added in. Schema feeds it the JSON messages of inbox/;
// AddRecords feeds it a batch file's records (package batch), so that CSV,
// JSON Lines and XML are typed by this one inference. Memory is bounded
// by the number of distinct fields.
type Inference struct {
	c      spool.Contract
	fields map[string]*firstSeen
	// skipped counts the messages and records left out, and first says
	// why the first of them was (Skipped).
	skipped int
	first   string
}

// skip counts a message or record of file left out, for the reason why.
func (in *Inference) skip(file, why string) {
	if in.skipped == 0 {
		in.first = file + ": " + why
	}
	in.skipped++
}

// Skipped returns how many messages and records were left out, invalid
// or unreadable, and why the first of them was ("orders.csv: the header
// (line 1): no column ..."): an inference of nothing, with every message
// skipped, is a contract that does not fit the files, which that says.
func (in *Inference) Skipped() (int, string) { return in.skipped, in.first }

// NewInference returns an empty Inference for messages of contract c.
func NewInference(c spool.Contract) *Inference {
	return &Inference{c: c, fields: map[string]*firstSeen{}}
}

// Add takes the fields of m, a message that passed c.Parse: record is
// its place among the records of file, 0 for a file of one message.
func (in *Inference) Add(file string, record int64, m *spool.Message) {
	for pos, f := range m.Fields {
		s, ok := in.fields[f.Name]
		if !ok {
			s = &firstSeen{file: file, record: record, pos: pos, kinds: map[spool.Kind]bool{}}
			in.fields[f.Name] = s
		} else if s.compare(file, record, pos) < 0 {
			s.file, s.record, s.pos = file, record, pos
		}
		s.kinds[kindOf(in.c, m, f)] = true
	}
}

// AddRecords reads the batch file of r to its end and adds each record
// that the contract accepts; records that fail to read or to validate are
// skipped, as invalid JSON messages are, and a file that cannot be read at
// all adds nothing. It stops at ctx's end and at a failure to read the
// file.
func (in *Inference) AddRecords(ctx context.Context, file string, r spool.BatchReader) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := r.Next()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("schema of %s: %w", file, err)
		case rec.Whole:
			in.skip(file, rec.Reject.Error())
			return nil
		case rec.Reject != nil:
			in.skip(file, rec.Reject.Error())
			continue
		}
		m, err := in.c.Parse(rec.JSON)
		var rej *spool.RejectError
		switch {
		case errors.As(err, &rej):
			in.skip(file, rej.Error())
			continue
		case err != nil:
			return fmt.Errorf("schema of %s: %w", file, err)
		}
		in.Add(file, rec.Index+1, m)
	}
}

// Rows returns the schema inferred so far.
func (in *Inference) Rows() []SchemaRow {
	rows := make([]SchemaRow, 0, len(in.fields))
	for name, s := range in.fields {
		rows = append(rows, SchemaRow{Field: name, Type: typeOf(s.kinds), Role: role(in.c, name)})
	}
	slices.SortFunc(rows, func(a, b SchemaRow) int {
		fa := in.fields[a.Field]
		return in.fields[b.Field].compare(fa.file, fa.record, fa.pos)
	})
	return rows
}

// Schema infers the schema of the valid messages waiting in inbox/: the
// union of their top-level fields, each with its type and contract role.
// Fields are ordered by first appearance, taking the files in name order and
// each file's keys in document order. Files are read as `spool consume`
// would inspect them, without claiming: a message that is not a regular
// file, is over the contract's size limit, fails to parse or validate, or
// is consumed while Schema runs is skipped (Inference.Skipped counts them).
// Memory is bounded by the number of distinct fields, not of files. The
// schema is the Inference's Rows.
func Schema(ctx context.Context, d *queue.Dir, c spool.Contract, files spool.BatchFiles) (*Inference, error) {
	in := NewInference(c)
	err := d.List(queue.Inbox, func(e queue.Entry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.Regular() {
			return nil
		}
		if files != nil && files.Batched(e.Name) {
			return addBatch(ctx, in, d, e, files)
		}
		data, err := d.ReadEntry(queue.Inbox, e, c.Limit())
		var tooLarge *queue.TooLargeError
		switch {
		case errors.As(err, &tooLarge):
			in.skip(e.Name, err.Error())
			return nil
		case errors.Is(err, queue.ErrNotRegular), errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		}
		m, err := c.Parse(data)
		var rej *spool.RejectError
		switch {
		case errors.As(err, &rej):
			in.skip(e.Name, rej.Error())
			return nil
		case err != nil:
			return err
		}
		in.Add(e.Name, 0, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return in, nil
}

// addBatch adds the records of the batch file of entry e of inbox/.
func addBatch(ctx context.Context, in *Inference, d *queue.Dir, e queue.Entry, files spool.BatchFiles) error {
	f, err := d.OpenEntry(queue.Inbox, e)
	switch {
	case errors.Is(err, queue.ErrNotRegular), errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	}
	defer f.Close() // read only
	r, err := files.OpenBatch(f, e.Name, "")
	if err != nil {
		return nil // a file that cannot be read at all: skipped, as an invalid message
	}
	return in.AddRecords(ctx, e.Name, r)
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
