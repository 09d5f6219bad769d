package batch

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// CSV is read as encoding/csv reads it with LazyQuotes off (RFC 4180): a
// field in double quotes may hold the delimiter, line breaks and doubled
// quotes; CRLF becomes LF inside quotes; empty lines, and lines starting
// with the comment character outside quotes, are skipped; the first
// record is the header. FuzzCSV checks the records against encoding/csv's.
// Where encoding/csv stops at an error, this reader fails the record and
// goes on with the next: a row of the wrong width, a bare quote in a field
// without quotes, text after a closing quote. A quote never closed runs
// to the end of the file, which is then one failure.

// csvSplit finds a CSV record's end in the file's bytes: the first line
// feed outside quotes. A quote opens a quoted field only at a field's
// start, as in encoding/csv, so that a stray quote inside a field (5"
// screen) fails its own row and does not swallow the rows after it.
type csvSplit struct {
	delim   []byte // in the file's encoding
	special [256]bool
	pos     int
	quoted  bool // inside a quoted field
	start   bool // at a field's start
	open    bool // the unit just split ended at EOF inside quotes
}

func newCSVSplit(delim []byte) csvSplit {
	s := csvSplit{delim: delim}
	s.special['\n'], s.special['"'], s.special[delim[0]] = true, true, true
	s.reset()
	return s
}

func (s *csvSplit) reset() { s.pos, s.quoted, s.start = 0, false, true }

func (s *csvSplit) split(data []byte, atEOF bool) int {
	for s.pos < len(data) {
		if s.quoted {
			i := bytes.IndexByte(data[s.pos:], '"')
			if i < 0 {
				s.pos = len(data)
				break
			}
			q := s.pos + i
			if q+1 == len(data) && !atEOF {
				s.pos = q // the byte after the quote says whether it is doubled
				return -1
			}
			if q+1 < len(data) && data[q+1] == '"' {
				s.pos = q + 2
				continue
			}
			s.pos, s.quoted, s.start = q+1, false, false
			continue
		}
		from := s.pos
		for s.pos < len(data) && !s.special[data[s.pos]] {
			s.pos++
		}
		if s.pos > from {
			s.start = false
		}
		if s.pos == len(data) {
			break
		}
		switch c := data[s.pos]; {
		case c == '\n':
			end := s.pos + 1
			s.reset()
			s.open = false
			return end
		case c == '"' && s.start:
			s.pos, s.quoted, s.start = s.pos+1, true, false
		case c == s.delim[0] && bytes.HasPrefix(data[s.pos:], s.delim):
			s.pos, s.start = s.pos+len(s.delim), true
		case c == s.delim[0] && len(data)-s.pos < len(s.delim) && !atEOF:
			return -1 // perhaps the delimiter's first byte: wait for the rest
		default:
			s.pos, s.start = s.pos+1, false
		}
	}
	if atEOF && len(data) > 0 {
		open := s.quoted
		s.reset()
		s.open = open
		return len(data)
	}
	return -1
}

func (s *csvSplit) keep() int  { return s.pos }
func (s *csvSplit) drop(n int) { s.pos -= n }

// csvReader reads a CSV file's header and records.
type csvReader struct {
	r       *Reader
	split   csvSplit
	lines   lineSplit
	comment []byte // the comment character in the file's encoding; nil for none
	delim   []byte // the delimiter in UTF-8, for the decoded fields
	names   [][]byte
	sepSeen bool   // the file's first line was Excel's sep=, skipped
	field   []byte // scratch: a quoted value without its doubled quotes
	body    []byte // scratch: a record with its CRLFs made LF
	out     []byte // scratch: the record's JSON object
}

func newCSVReader(r *Reader) *csvReader {
	delim, _ := r.cs.encode(string(r.f.delimiter())) // Check made sure it encodes
	c := &csvReader{r: r, split: newCSVSplit(delim), delim: utf8.AppendRune(nil, r.f.delimiter())}
	if cm := r.f.comment(); cm != 0 {
		c.comment, _ = r.cs.encode(string(cm))
	}
	return c
}

// unit reads the next CSV record's bytes, skipping empty and comment
// lines. The line it starts on is r.line when it returns.
func (c *csvReader) unit() (u unit, line int64, ok bool, err error) {
	r := c.r
	for {
		if c.comment != nil {
			for len(r.src.data()) < len(c.comment) && r.src.fill() {
			}
			if bytes.HasPrefix(r.src.data(), c.comment) {
				u, ok, err := r.readUnit(&c.lines)
				if err != nil || !ok {
					return u, 0, ok, err
				}
				r.line += u.lines
				if u.byEOF && r.src.broken != nil {
					return unit{start: r.src.offset()}, r.line, false, nil
				}
				continue
			}
		}
		line = r.line
		u, ok, err = r.readUnit(&c.split)
		if err != nil || !ok {
			return u, line, ok, err
		}
		r.line += u.lines
		if u.raw != nil && !c.split.open && onlyDelims(trimLineEnd(u.raw), c.split.delim) {
			continue // an empty line, or a spreadsheet's empty row (;;;)
		}
		return u, line, true, nil
	}
}

// header reads the header row. A file without one has no records; a
// header that cannot name the fields (a name empty or twice, a row that
// does not parse) makes the whole file unreadable.
func (c *csvReader) header() (*Record, error) {
	r := c.r
	u, line, ok, err := c.unit()
	if err != nil || !ok {
		return nil, err
	}
	whole := func(format string, args ...any) (*Record, error) {
		rec, err := r.tail(u, line, 0, fmt.Sprintf("the header (line %d): ", line)+fmt.Sprintf(format, args...))
		return &rec, err
	}
	switch {
	case u.byEOF && r.src.broken != nil:
		return whole("%s", r.src.brokenDetail())
	case u.raw == nil:
		return whole("longer than the limit of %d bytes", r.limit)
	case c.split.open:
		return whole("a quoted field is not closed before the end of the file")
	}
	text, bad := r.dec.decode(u.raw)
	if bad != nil {
		return whole("%s", bad.describe(r.cs))
	}
	if d, ok := excelSep(text); ok && !c.sepSeen {
		if d != r.f.delimiter() {
			return whole("sep=%c, Excel's line naming the file's delimiter, and the queue's delimiter is %q: set delimiter to %q, or remove the line", d, string(r.f.delimiter()), string(d))
		}
		c.sepSeen = true
		return c.header() // it says what the queue knows: the header follows
	}
	var names [][]byte
	odd := ""
	n, msg := c.parse(text, func(i int, v []byte) {
		names = append(names, appendString(nil, v))
		if odd == "" {
			odd = oddName(v)
			if odd != "" {
				odd = fmt.Sprintf("field %d %s", i+1, odd)
			}
		}
	})
	if msg != "" {
		return whole("%s", msg)
	}
	if odd != "" {
		return whole("%s", odd)
	}
	// A set, not a look back at each name: 100 000 columns took 17 s.
	seen := make(map[string]bool, len(names))
	for i, name := range names {
		if len(name) == 2 && i == len(names)-1 && i > 0 {
			return whole("field %d has no name: the header ends with the delimiter; remove it (and the rows' last, empty field)", i+1)
		}
		if len(name) == 2 {
			return whole("field %d has no name", i+1)
		}
		if seen[string(name)] {
			return whole("the name %s is given twice", name)
		}
		seen[string(name)] = true
	}
	for _, want := range r.f.columns {
		if !seen[string(want)] {
			if d := otherDelimiter(names, want, r.f.delimiter()); d != "" {
				return whole("no column %s, which the contract requires: every row would fail%s", want, d)
			}
			hint := alike(names, want)
			if !strings.Contains(hint, "space after") {
				hint += " (is the file this queue's?)"
			}
			return whole("no column %s, which the contract requires: every row would fail%s", want, hint)
		}
	}
	c.names = names[:n]
	r.prefix = append(append([]byte{}, bomUTF8[:r.bom]...), u.raw...)
	return nil, nil
}

// isName reports whether the field v is the header's name, a JSON
// string as the header's names are kept.
func isName(name, v []byte) bool {
	if len(name) == len(v)+2 && bytes.Equal(name[1:len(name)-1], v) {
		return true
	}
	return len(name) > len(v)+2 && bytes.Equal(name, appendString(nil, v))
}

// onlyDelims reports whether line is empty or the delimiter alone,
// repeated: a row of empty cells, which spreadsheets write for rows
// that were once formatted and hold nothing. It carries no value, so it
// is skipped as an empty line is, and not a dead letter a row.
func onlyDelims(line, delim []byte) bool {
	for len(line) > 0 {
		rest, ok := bytes.CutPrefix(line, delim)
		if !ok {
			return false
		}
		line = rest
	}
	return true
}

// excelSep reports whether text, the file's first line, is the line
// sep=D that Excel writes before a CSV file's header to name its
// delimiter D, and D.
func excelSep(text []byte) (rune, bool) {
	rest, ok := bytes.CutPrefix(trimLineEnd(text), []byte("sep="))
	if !ok || len(rest) == 0 {
		return 0, false
	}
	d, size := utf8.DecodeRune(rest)
	return d, size == len(rest) && d != utf8.RuneError
}

// alike names a header name that differs from the wanted one, a JSON
// string as both are, only by spaces around it or by case, as "; the
// header has ...", or "".
func alike(names [][]byte, want []byte) string {
	w := bytes.TrimSpace(want[1 : len(want)-1])
	for _, n := range names {
		name := n[1 : len(n)-1]
		switch {
		case bytes.Equal(bytes.TrimSpace(name), w) && bytes.HasPrefix(name, []byte(" ")):
			return fmt.Sprintf("; the header has %s: a space after the delimiter is part of the field in CSV, write the file without one", n)
		case bytes.EqualFold(bytes.TrimSpace(name), w):
			return fmt.Sprintf("; the header has %s", n)
		}
	}
	return ""
}

// delimiters are the field separators of CSV files that otherDelimiter
// tries, each with how it appears in a JSON string, which is also how
// spool.conf spells it.
var delimiters = []struct {
	d   rune
	sep string
}{{';', ";"}, {'\t', `\t`}, {'|', "|"}, {',', ","}}

// otherDelimiter says, as "; ...", which other delimiter would split
// a header read as one field into fields one of which is the wanted one,
// a JSON string as the names are (a European export, "msg_id;order_no",
// read with commas), or "".
func otherDelimiter(names [][]byte, want []byte, queue rune) string {
	if len(names) != 1 {
		return ""
	}
	name, w := names[0][1:len(names[0])-1], want[1:len(want)-1]
	for _, d := range delimiters {
		if d.d == queue {
			continue
		}
		for _, f := range bytes.Split(name, []byte(d.sep)) {
			if bytes.Equal(bytes.TrimSpace(f), w) && !bytes.Equal(f, name) {
				return fmt.Sprintf(`; the header is one field that "%s" splits: set the delimiter to "%s"`, d.sep, d.sep)
			}
		}
	}
	return ""
}

// oddName says what in a header name v shows that the file was not read
// as it was written, "" when nothing does: the whole file would be read
// wrong, quietly (a header of every row and no record).
func oddName(v []byte) string {
	switch {
	case bytes.IndexByte(v, 0) >= 0:
		// ASCII written in two bytes, read in one.
		return "holds a NUL character: the file looks like UTF-16 without a byte order mark; set the encoding to utf-16le (or utf-16be), or convert the file"
	case bytes.Contains(v, []byte("\u0a00")):
		// U+0A00 is no character: a line feed in UTF-16 of the other
		// byte order, so the whole file was one line.
		return "holds U+0A00, a line feed in the other byte order: the file is UTF-16 of the other order without a byte order mark; set the encoding to that order, or add the mark"
	case bytes.IndexByte(v, '\r') >= 0:
		// Lines that end with CR alone (classic Mac OS) are one line.
		return "holds a carriage return: the file's lines end with CR alone, which is no line end in CSV; convert them to LF or CRLF"
	}
	return ""
}

// next reads the next record.
func (c *csvReader) next() (Record, bool, error) {
	r := c.r
	if c.names == nil {
		return Record{}, false, nil // no header: no records
	}
	u, line, ok, err := c.unit()
	if err != nil || !ok {
		return Record{}, false, err
	}
	rec := r.record(u, line)
	switch {
	case u.byEOF && r.src.broken != nil:
		rec, err := r.tail(u, line, 0, r.src.brokenDetail())
		return rec, err == nil, err
	case c.split.open:
		rec, err := r.tail(u, line, 0, "a quoted field is not closed before the end of the file")
		return rec, err == nil, err
	case u.raw == nil:
		r.tooLarge(&rec)
		return rec, true, nil
	case r.light:
		return rec, true, nil
	}
	text, bad := r.dec.decode(u.raw)
	if bad != nil {
		rec.Raw = bytes.Clone(u.raw)
		r.fail(&rec, "%s", bad.describe(r.cs))
		return rec, true, nil
	}
	c.out = append(c.out[:0], '{')
	extraEmpty := true // the fields past the header's are empty
	header := true     // the fields are the header's names
	n, msg := c.parse(text, func(i int, v []byte) {
		if i >= len(c.names) {
			extraEmpty = extraEmpty && len(v) == 0
			return
		}
		name := v
		if i == 0 {
			name = bytes.TrimPrefix(v, bomUTF8) // the header again, with its file's mark
		}
		header = header && isName(c.names[i], name)
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(append(c.out, c.names[i]...), ':')
		c.out = appendString(c.out, v)
	})
	switch {
	case msg != "":
		rec.Raw = bytes.Clone(u.raw)
		r.fail(&rec, "%s", msg)
	case n == len(c.names)+1 && extraEmpty:
		rec.Raw = bytes.Clone(u.raw)
		r.fail(&rec, "%d fields, and the header has %d: the line ends with the delimiter", n, len(c.names))
	case n != len(c.names):
		rec.Raw = bytes.Clone(u.raw)
		r.fail(&rec, "%d fields, and the header has %d", n, len(c.names))
	case header:
		// Files joined with cat: read as a row, the second header
		// would be a record whose key is the key column's name.
		rec.Raw = bytes.Clone(u.raw)
		r.fail(&rec, "the header again, as a row: files joined into one? (a file has one header, its first line)")
	default:
		rec.Raw, rec.JSON = owned(u.raw, append(c.out, '}'), -1)
	}
	return rec, true, nil
}

// parse splits a record's decoded text into its fields as encoding/csv
// does, calling emit with each (valid until emit returns), and returns
// their number, or what is wrong with the row.
func (c *csvReader) parse(text []byte, emit func(i int, v []byte)) (int, string) {
	body := bytes.TrimSuffix(text, newline)
	body = bytes.TrimSuffix(body, []byte{'\r'}) // CRLF, or a CR at the end of the file
	if bytes.Contains(body, []byte("\r\n")) {
		c.body = append(c.body[:0], body...)
		c.body = bytes.ReplaceAll(c.body, []byte("\r\n"), newline)
		body = c.body
	}
	n := 0
	for i := 0; ; n++ {
		if i < len(body) && body[i] == '"' {
			i++
			v := c.field[:0]
			for {
				j := bytes.IndexByte(body[i:], '"')
				if j < 0 {
					return n, fmt.Sprintf("field %d: a quoted field is not closed", n+1)
				}
				v = append(v, body[i:i+j]...)
				i += j + 1
				if i < len(body) && body[i] == '"' {
					v = append(v, '"')
					i++
					continue
				}
				break
			}
			c.field = v
			emit(n, v)
			if i == len(body) {
				return n + 1, ""
			}
			if !bytes.HasPrefix(body[i:], c.delim) {
				return n, fmt.Sprintf("field %d: text after the closing quote (a quote inside quotes is written twice)", n+1)
			}
			i += len(c.delim)
			continue
		}
		j := bytes.Index(body[i:], c.delim)
		if j < 0 {
			j = len(body) - i
		}
		v := body[i : i+j]
		if bytes.IndexByte(v, '"') >= 0 {
			return n, fmt.Sprintf("field %d: a quote in a field without quotes (quote the field, and write the quote twice)", n+1)
		}
		emit(n, v)
		if i+j == len(body) {
			return n + 1, ""
		}
		i += j + len(c.delim)
	}
}
