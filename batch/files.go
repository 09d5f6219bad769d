package batch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spoolq/spool"
)

// Files returns the spool.BatchFiles of a queue whose format is f and
// contract c, for spool.Config.Batch: the consumer's view of this
// package. Its records' JSON is made ready for c.Parse: for CSV and XML,
// whose values are all strings, a seq field holding a decimal integer
// ("17") becomes that number, so that the contract checks it as it
// checks a JSON number (0 and -3 are refused as ever, and anything else,
// "1.0" or "x", stays a string and is refused as one), and an empty
// value of a field the contract reads but does not require is null, the
// field absent (stringValues); with HashKey the
// record's Key is put in the contract's key field, which the record must
// not have itself. f must pass Check.
func Files(f Format, c spool.Contract) (spool.BatchFiles, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	if f.MaxSize == 0 {
		f.MaxSize = c.Limit()
	}
	switch f.kind() {
	case CSV:
		f.columns = columns(c, f.HashKey)
	case XML:
		f.numbers, f.read = map[string]bool{}, map[string]bool{}
		for _, name := range []string{c.SeqField, c.AmountField} {
			if name != "" {
				f.numbers[name] = true
			}
		}
		for _, name := range []string{c.KeyField, c.OrderField, c.SeqField, c.AmountField, c.Headers.Version, c.Headers.Trace, c.Headers.Tenant} {
			if name != "" {
				f.read[name] = true
			}
		}
	}
	return files{f: f, c: c, sv: newStringValues(c)}, nil
}

// columns are the fields of c that a CSV header must name, as
// Format.columns holds them: the required ones, and the key field unless
// hashKey makes the key.
func columns(c spool.Contract, hashKey bool) [][]byte {
	var out [][]byte
	seen := map[string]bool{}
	for _, name := range append([]string{c.KeyField}, c.Required...) {
		if name == "" || seen[name] || hashKey && name == c.KeyField {
			continue
		}
		seen[name] = true
		out = append(out, appendString(nil, []byte(name)))
	}
	return out
}

type files struct {
	f  Format
	c  spool.Contract
	sv stringValues
}

// Batched: every file of a format other than JSON.
func (fs files) Batched(name string) bool { return fs.f.kind() != JSON }

// DoneFile is Format.DoneName of a data file; "" for a dead letter put
// back by a replay, which Match takes without one, and for a name that is
// not a data file (a done-file itself).
func (fs files) DoneFile(name string) string { return fs.f.AnnouncedBy(name) }

// IsDoneFile reports whether name has the shape of the format's
// done-files, which no data file has (Includes).
func (fs files) IsDoneFile(name string) bool { return fs.f.isDoneName(name) }

// OpenBatch opens r as a batch file and resumes it at position.
func (fs files) OpenBatch(r io.ReadSeeker, name, position string) (spool.BatchReader, error) {
	rd, err := Open(r, name, fs.f)
	if err != nil {
		return nil, err
	}
	if position != "" {
		p, err := ParsePosition(position)
		if err != nil {
			return nil, fmt.Errorf("resume %s: %w", name, err)
		}
		if err := rd.Resume(p); err != nil {
			return nil, err
		}
	}
	return &fileReader{fs: fs, rd: rd, r: r, name: name}, nil
}

type fileReader struct {
	fs   files
	rd   *Reader
	r    io.ReadSeeker
	name string
}

// Note is the reader's: see spool.BatchReader.
func (fr *fileReader) Note() string { return fr.rd.Note() }

// Next converts the reader's next record for the consumer.
func (fr *fileReader) Next() (spool.BatchRecord, error) {
	rec, err := fr.rd.Next()
	if err != nil {
		return spool.BatchRecord{}, err
	}
	out := spool.BatchRecord{Index: rec.Index, Reject: rec.Err, Whole: rec.Whole, After: rec.After().String()}
	out.Origin = "L" + strconv.FormatInt(rec.Line, 10)
	if rec.Element > 0 {
		out.Origin = "E" + strconv.FormatInt(rec.Element, 10)
	}
	if rec.Whole {
		return out, nil
	}
	// The name now, the content only for a record that fails: most
	// never do.
	out.DeadLetter = fr.name
	if fr.fs.f.kind() != JSON {
		out.DeadLetter = deadLetterName(fr.name, rec)
	}
	rd := fr.rd
	out.WriteDeadLetter = func(w io.Writer) error {
		dl := rd.DeadLetter(rec)
		if dl.Content != nil {
			_, err := w.Write(dl.Content)
			return err
		}
		// A record over the limit was not held: copy it from the file,
		// then put the file's offset back where the reader left it.
		cur, err := fr.r.Seek(0, io.SeekCurrent)
		if err != nil {
			return fmt.Errorf("dead letter %s: %w", dl.Name, err)
		}
		if _, err := fr.r.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("dead letter %s: %w", dl.Name, err)
		}
		if _, err := w.Write(dl.Prefix); err != nil {
			return err
		}
		if err := fr.fs.f.CopyRange(w, fr.r, fr.name, dl.Start, dl.End); err != nil {
			return err
		}
		if _, err := fr.r.Seek(cur, io.SeekStart); err != nil {
			return fmt.Errorf("dead letter %s: %w", dl.Name, err)
		}
		return nil
	}
	if rec.Err != nil {
		return out, nil
	}
	obj := rec.JSON
	if fr.fs.f.kind() == CSV || fr.fs.f.kind() == XML {
		obj = fr.fs.sv.apply(obj)
	}
	if fr.fs.f.HashKey {
		key, err := Key(rec.JSON)
		if err != nil {
			out.Reject = &spool.RejectError{Reason: spool.ReasonParse, Detail: rec.Origin() + ": " + err.Error()}
			return out, nil
		}
		obj = withField(obj, fr.fs.c.KeyField, key)
	}
	out.JSON = obj
	return out, nil
}

// stringValues are the contract's rules for reading the fields of a
// record whose values are all strings (CSV, XML) as a JSON producer
// would have written them: the seq field's decimal integer ("17") is
// that number, and an optional field's empty value (an empty CSV cell,
// <amount/>) is null, the field absent, where a JSON producer leaves the
// field out. Anything else is left as it is, for the contract to refuse
// as it refuses a string ("1.0", "x"; "" for a required field).
type stringValues struct {
	seq      string
	optional map[string]bool // the contract's fields a record may leave out
}

// newStringValues are c's rules: optional are the order, seq and amount
// fields and the header fields that c does not require (the key field
// is always required).
func newStringValues(c spool.Contract) stringValues {
	sv := stringValues{seq: c.SeqField, optional: map[string]bool{}}
	for _, name := range []string{c.OrderField, c.SeqField, c.AmountField, c.Headers.Version, c.Headers.Trace, c.Headers.Tenant} {
		if name != "" && name != c.KeyField && !slices.Contains(c.Required, name) {
			sv.optional[name] = true
		}
	}
	return sv
}

// value returns what the top-level member name's value v (as written)
// becomes, and false when it stays as it is.
// The name is bytes, so that the fast path, on every record, compares and
// looks it up without making a string of it.
func (sv stringValues) value(name, v []byte) ([]byte, bool) {
	switch {
	case string(name) == sv.seq && len(v) >= 3 && v[0] == '"' && isDecimal(v[1:len(v)-1]):
		return v[1 : len(v)-1], true
	case string(v) == `""` && sv.optional[string(name)]:
		return []byte("null"), true
	}
	return nil, false
}

// apply returns obj, a JSON object, with its top-level members' values
// changed as value says.
func (sv stringValues) apply(obj []byte) []byte {
	if out, ok := sv.applyCompact(obj); ok {
		return out
	}
	return sv.applySplit(obj)
}

// applyCompact is apply for the objects this package builds for CSV and
// XML records: no whitespace between tokens, and member names written as
// json.Marshal writes them (printable ASCII without an escape), so that
// a name's bytes are the name. It gives the bytes applySplit's
// re-encoding would, without a json.Decoder; false for any other object,
// left to applySplit.
func (sv stringValues) applyCompact(obj []byte) ([]byte, bool) {
	if len(obj) < 2 || obj[0] != '{' {
		return nil, false
	}
	if len(obj) == 2 && obj[1] == '}' {
		return obj, true
	}
	type change struct {
		start, end int
		to         []byte
	}
	var changes []change
	j := jsonText{data: obj, pos: 1}
	for {
		if j.pos >= len(obj) || obj[j.pos] != '"' {
			return nil, false
		}
		ns := j.pos
		if !j.str() {
			return nil, false
		}
		raw := obj[ns+1 : j.pos-1]
		for _, c := range raw {
			if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return nil, false
			}
		}
		if j.pos >= len(obj) || obj[j.pos] != ':' {
			return nil, false
		}
		j.pos++
		vs := j.pos
		if vs >= len(obj) || obj[vs] == ' ' || obj[vs] == '\t' || obj[vs] == '\r' || obj[vs] == '\n' || !j.value(0) {
			return nil, false
		}
		if to, ok := sv.value(raw, obj[vs:j.pos]); ok {
			changes = append(changes, change{vs, j.pos, to})
		}
		if j.pos >= len(obj) {
			return nil, false
		}
		c := obj[j.pos]
		j.pos++
		if c == '}' {
			if j.pos != len(obj) {
				return nil, false
			}
			break
		}
		if c != ',' {
			return nil, false
		}
	}
	if len(changes) == 0 {
		return obj, true
	}
	out := make([]byte, 0, len(obj))
	last := 0
	for _, ch := range changes {
		out = append(append(out, obj[last:ch.start]...), ch.to...)
		last = ch.end
	}
	return append(out, obj[last:]...), true
}

// applySplit is apply for any object: split into its members by a
// json.Decoder, and joined again when changed.
func (sv stringValues) applySplit(obj []byte) []byte {
	members, ok := splitObject(obj)
	if !ok {
		return obj
	}
	changed := false
	for i, m := range members {
		if to, ok := sv.value([]byte(m.name), m.value); ok {
			members[i].value = to
			changed = true
		}
	}
	if !changed {
		return obj
	}
	return joinObject(members)
}

// isDecimal reports whether b is "0" or an optional "-" then digits not
// starting with 0: a JSON integer.
func isDecimal(b []byte) bool {
	b = bytes.TrimPrefix(b, []byte("-"))
	if len(b) == 0 || len(b) > 1 && b[0] == '0' {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// withField returns obj with a string objMember name: value put first.
func withField(obj []byte, name, value string) []byte {
	n, _ := json.Marshal(name)
	v, _ := json.Marshal(value)
	rest := bytes.TrimLeft(obj, " \t\r\n")[1:] // after "{"
	out := append([]byte{'{'}, n...)
	out = append(append(out, ':'), v...)
	if t := bytes.TrimLeft(rest, " \t\r\n"); len(t) > 0 && t[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

type objMember struct {
	name  string
	key   json.RawMessage
	value []byte
}

// splitObject splits a JSON object into its members, in order, each value
// as written.
func splitObject(obj []byte) ([]objMember, bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var out []objMember
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		k, _ := json.Marshal(name)
		out = append(out, objMember{name: name, key: k, value: v})
	}
	return out, true
}

// joinObject writes members as one JSON object.
func joinObject(members []objMember) []byte {
	out := []byte{'{'}
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, m.key...), ':'), m.value...)
	}
	return append(out, '}')
}

// String writes p as ParsePosition reads it: "record:offset:line".
func (p Position) String() string {
	b := make([]byte, 0, 32)
	b = strconv.AppendInt(b, p.Record, 10)
	b = strconv.AppendInt(append(b, ':'), p.Offset, 10)
	b = strconv.AppendInt(append(b, ':'), p.Line, 10)
	return string(b)
}

// ParsePosition reads a Position written by Position.String.
func ParsePosition(s string) (Position, error) {
	var p Position
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return p, fmt.Errorf("position %q: want record:offset:line", s)
	}
	vals := make([]int64, 3)
	for i, t := range parts {
		v, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return p, fmt.Errorf("position %q: %w", s, err)
		}
		vals[i] = v
	}
	return Position{Record: vals[0], Offset: vals[1], Line: vals[2]}, nil
}
