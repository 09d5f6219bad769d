package batch

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spoolq/spool"
)

// Record is one record of a batch file: its origin, its bytes as they are
// in the file, and either its fields as a JSON object for
// spool.Contract.Parse or why it cannot be read. A Record owns its
// slices: they stay valid after the next call to Next.
type Record struct {
	// File is the name given to Open.
	File string
	// Index is the record's place among the file's records and
	// failures, from 0: a failure takes an index as a record does.
	Index int64
	// Line is the 1-based line of the file where the record starts, for
	// every format (for XML, the line of its start tag).
	Line int64
	// Element is, for XML, the record's 1-based place among the
	// elements named Format.Record; 0 for the other formats.
	Element int64
	// Start and End are the byte offsets in the file's stream (after
	// gzip) of the record's first byte and of the byte after its last:
	// for JSON Lines and CSV its line break included. End is where the
	// next record may start: After() is the position there.
	Start, End int64
	// Raw is the record's bytes, Start to End, as in the file: in the
	// file's encoding, the way a one-record dead letter must hold them.
	// It is nil when the record is longer than the limit (Err is then
	// too-large): CopyRange copies the range from the file instead.
	Raw []byte
	// JSON is the record as one JSON object, in UTF-8, ready for
	// spool.Contract.Parse: a JSON Lines line as written, without the
	// whitespace around it; for CSV the header's names with the row's
	// values as strings, in column order; for XML the element's
	// attributes and children (docs/DESIGN.md, "Batch files"). Nil when
	// Err is set.
	JSON []byte
	// Err says why the record cannot be read: reason parse, or
	// too-large for a record over the limit, with a detail that names
	// the line or element. The contract's own checks (Contract.Parse on
	// JSON) come after, and may reject a record Err lets through.
	Err *spool.RejectError
	// Tail marks a failure that runs to the end of the file: the reader
	// could not tell where the record ends or read on (a damaged gzip
	// stream, broken XML outside the records, a CSV quote never closed).
	// Next returns io.EOF after it. A tail's one dead letter holds the
	// rest of the file.
	Tail bool
	// Whole marks a Tail failure before any record: the file cannot be
	// read at all (not gzip, a bad CSV header, not XML, a byte order mark
	// of another encoding). Its dead letter is the file itself, moved to
	// error/ as spool has always done with a bad file.
	Whole bool

	next  Position
	scope []xmlnsDecl // XML: the namespace declarations in scope, for the dead letter
}

// After is the position after the record: where a reader resumed with
// Reader.Resume goes on, with the record after this one.
func (rec Record) After() Position { return rec.next }

// Origin names where the record is in its file, as its details do: "line
// 17", or "element 5 (line 42)" for XML.
func (rec Record) Origin() string {
	if rec.Element > 0 {
		return fmt.Sprintf("element %d (line %d)", rec.Element, rec.Line)
	}
	return fmt.Sprintf("line %d", rec.Line)
}

// Position is a reader's place between two records of a file: how many
// records (failures included) come before it, the stream offset where the
// next starts, and that offset's line. Phase 2 keeps the Position of the
// last record it committed in the transaction that commits the records,
// and resumes there after a crash (Reader.Resume).
type Position struct {
	Record int64
	Offset int64
	Line   int64
}

// Reader reads the records of one file in order; Open makes one. Its
// memory is a small multiple of the record limit (the window over the
// file, one record decoded and converted), whatever the file's size. A
// Reader is not safe for concurrent use.
type Reader struct {
	name  string
	f     Format
	kind  string
	limit int64
	cs    *charset
	dec   *decoder
	src   *source

	started bool
	light   bool  // Resume: split and count without building records
	err     error // sticky: reading the file failed
	done    bool
	index   int64
	line    int64 // the line of the read position
	bom     int   // the length of the UTF-8 byte order mark skipped

	prefix []byte // what a one-record dead letter of this file starts with

	jsonl lineSplit
	whole wholeSplit
	csv   *csvReader
	xml   *xmlReader
}

// Open returns a Reader of the records of the file named name, whose
// bytes r gives; a name ending in ".gz" is read through gzip. Open reads
// nothing: it fails only for a Format that does not pass Check. Damaged
// content comes out of Next as failed records, and only a failure to read
// r itself is an error of Next.
func Open(r io.Reader, name string, f Format) (*Reader, error) {
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	cs, _ := lookupCharset(f.Encoding) // Check resolved it
	rd := &Reader{
		name: name, f: f, kind: f.kind(), limit: f.limit(), cs: cs, dec: cs.newDecoder(),
		src:  newSource(r, strings.HasSuffix(name, ".gz"), cs.utf16, f.limit()),
		line: 1,
	}
	switch rd.kind {
	case CSV:
		rd.csv = newCSVReader(rd)
	case XML:
		rd.xml = newXMLReader(rd)
	}
	return rd, nil
}

// Next returns the next record, or a failure in its place, and io.EOF
// after the last. Any other error is a failure to read the file (an I/O
// error of the reader given to Open), not of its content: the caller
// stops and tries the file again later; Next keeps returning it.
func (r *Reader) Next() (Record, error) {
	switch {
	case r.err != nil:
		return Record{}, r.err
	case r.done:
		return Record{}, io.EOF
	}
	rec, ok, err := r.next()
	if err != nil {
		r.err = fmt.Errorf("read %s: %w", r.name, err)
		return Record{}, r.err
	}
	if !ok {
		if r.src.broken == nil {
			r.done = true
			return Record{}, io.EOF
		}
		// The stream broke right after a whole record: the break is a
		// failure of its own, with nothing in it.
		rec, err = r.tail(unit{start: r.src.offset()}, r.line, r.elementNext(), r.src.brokenDetail())
		if err != nil {
			r.err = fmt.Errorf("read %s: %w", r.name, err)
			return Record{}, r.err
		}
	}
	r.index++
	if rec.Tail {
		r.done = true
	}
	return rec, nil
}

// Note says what the reader of a file read to its end found that the
// operator should know though nothing failed, or "": an XML file whose
// root holds elements and none of the queue's records (see
// spool.BatchReader).
func (r *Reader) Note() string {
	if r.xml == nil {
		return ""
	}
	return r.xml.note()
}

func (r *Reader) next() (Record, bool, error) {
	if !r.started {
		r.started = true
		rec, err := r.start()
		if err != nil {
			return Record{}, false, err
		}
		if rec != nil {
			return *rec, true, nil
		}
	}
	switch r.kind {
	case JSONL:
		return r.nextJSONL()
	case CSV:
		return r.csv.next()
	case XML:
		return r.xml.next()
	}
	return r.nextWhole()
}

// The byte order marks at the start of a file.
var (
	bomUTF8    = []byte{0xEF, 0xBB, 0xBF}
	bomUTF16LE = []byte{0xFF, 0xFE}
	bomUTF16BE = []byte{0xFE, 0xFF}
)

// start reads what comes before the first record: the byte order mark,
// which a UTF-8 file may have and which must agree with the encoding,
// and the CSV header. It returns a failure of the whole file, if any.
func (r *Reader) start() (*Record, error) {
	for len(r.src.data()) < len(bomUTF8) && r.src.fill() {
	}
	if r.src.ioErr != nil {
		return nil, r.src.ioErr
	}
	if r.kind == JSON {
		return nil, nil // the file's bytes go to Contract.Parse as they are, as ever
	}
	d := r.src.data()
	switch {
	case bytes.HasPrefix(d, bomUTF8):
		if r.cs.enc != nil {
			r.asUTF8()
		}
		r.bom = len(bomUTF8)
		r.src.consume(r.bom)
	case bytes.HasPrefix(d, bomUTF16LE), bytes.HasPrefix(d, bomUTF16BE):
		// A UTF-16 file's mark was decoded to UTF-8's: this file is UTF-16
		// in a queue of another encoding.
		rec, err := r.tail(unit{}, 1, r.elementNext(), fmt.Sprintf("the file starts with a UTF-16 byte order mark, and the queue's encoding is %s: set the encoding to utf-16le (or utf-16be), or convert the file", r.cs.name))
		return &rec, err
	}
	if r.kind == CSV {
		return r.csv.header() // the header's names say it (oddName)
	}
	why := r.unmarkedUTF16()
	if why == "" && r.kind == JSONL {
		why = r.notJSONLines()
	}
	if why != "" {
		// From the read position: after a byte order mark it skipped.
		rec, err := r.tail(unit{start: r.src.offset()}, 1, r.elementNext(), why)
		return &rec, err
	}
	return nil, nil
}

// asUTF8 reads the file as UTF-8 whatever the queue's encoding, as WHATWG
// decoding does: it starts with UTF-8's byte order mark, which no text of
// another encoding does (in windows-1252 it would be "ï»¿"). Excel's "CSV
// UTF-8" writes one, and so do editors that save a dead letter fixed.
// Its dead letters keep the mark (the CSV header's and the XML
// declaration's prefix have it; a JSON Lines line is given it), so that
// replayed they are read as UTF-8 again.
func (r *Reader) asUTF8() {
	r.cs, _ = lookupCharset("utf-8")
	r.dec = r.cs.newDecoder()
	switch r.kind {
	case CSV:
		r.csv = newCSVReader(r)
	case XML:
		r.xml = newXMLReader(r)
	case JSONL:
		r.prefix = bomUTF8
	}
}

// notJSONLines says why a JSON Lines file is none, or "": when its first
// character after white space cannot start a JSON object, or when its
// first line ends inside the object it starts, with more lines after it
// (JSON written over several lines). The file is then another format (a
// CSV export, a binary, pretty-printed JSON) sent to the wrong queue, and
// every line would fail alone, a dead letter each (20 001 files in error/
// for a CSV of 20 000 rows, six for one pretty-printed object); one dead
// letter of the whole file says it instead. A first line that is an
// object, or that breaks otherwise, or the file's only line cut short,
// is read a record at a time as ever.
func (r *Reader) notJSONLines() string {
	for {
		d := r.src.data()
		i := bytes.IndexFunc(d, notSpace)
		if i < 0 {
			if !r.src.fill() {
				return "" // empty, blank, or white space past the window: read as ever
			}
			continue
		}
		line := 1 + bytes.Count(d[:i], newline)
		if d[i] != '{' {
			what := fmt.Sprintf("byte 0x%02X", d[i])
			if d[i] > ' ' && d[i] <= '~' {
				what = fmt.Sprintf("%q", d[i])
			}
			return fmt.Sprintf("line %d starts with %s, where a JSON object starts with {: the file is not JSON Lines (one JSON object a line)", line, what)
		}
		k := bytes.IndexByte(d[i:], '\n')
		more := k >= 0 && bytes.ContainsFunc(d[i+k:], notSpace)
		if !more {
			if !r.src.fill() {
				return "" // the only line, or one longer than the window
			}
			continue
		}
		first, bad := r.dec.decode(bytes.TrimRight(d[i:i+k], "\r"))
		if bad != nil {
			return "" // its record fails, naming the bytes
		}
		j := jsonText{data: first}
		if !j.value(0) && j.pos >= len(first) {
			return fmt.Sprintf("line %d ends inside the JSON object it starts: the file is JSON written over several lines, not JSON Lines (one JSON object a line)", line)
		}
		return ""
	}
}

// notSpace reports whether c is not JSON's white space.
func notSpace(c rune) bool { return c != ' ' && c != '\t' && c != '\r' && c != '\n' }

// unmarkedUTF16 says why a JSON Lines or XML file that starts as no such
// file can is UTF-16 without a byte order mark, of another byte order than
// the queue's or in a queue of another encoding, or "" when it does not
// look so. Its first character is ASCII (a brace, an angle bracket,
// white space), which UTF-16 writes with a NUL byte beside it, and which
// UTF-16 of the other order decodes to U+XX00; neither can start a JSON
// object or an XML document, so the file would fail anyway, a record at
// a time and without a word on the cause.
func (r *Reader) unmarkedUTF16() string {
	for len(r.src.data()) < 3 && r.src.fill() {
	}
	d := r.src.data()
	ascii := func(b byte) bool { return b >= '\t' && b <= '~' }
	if r.cs.utf16 == nil {
		switch {
		case len(d) >= 2 && d[0] != 0 && ascii(d[0]) && d[1] == 0:
			return fmt.Sprintf("the file looks like UTF-16LE without a byte order mark (a NUL byte after its first character), and the queue's encoding is %s: set the encoding to utf-16le, or convert the file", r.cs.name)
		case len(d) >= 2 && d[0] == 0 && ascii(d[1]):
			return fmt.Sprintf("the file looks like UTF-16BE without a byte order mark (a NUL byte before its first character), and the queue's encoding is %s: set the encoding to utf-16be, or convert the file", r.cs.name)
		}
		return ""
	}
	c, _ := utf8.DecodeRune(d)
	if c&0xFF != 0 || !ascii(byte(c>>8)) {
		return ""
	}
	other := "utf-16be"
	if r.cs.name == "utf-16be" {
		other = "utf-16le"
	}
	return fmt.Sprintf("the file looks like %s without a byte order mark (it starts with U+%04X, %q in the other byte order), and the queue reads %s: set the encoding to %s, or add the mark", strings.ToUpper(other), c, rune(c>>8), r.cs.name, other)
}

// splitter finds where a unit of a file ends: a record, or what lies
// between records (a blank or comment line, XML markup).
type splitter interface {
	// split goes on scanning the unit that starts at data[0] (between
	// calls data keeps its start and grows) and returns the unit's length
	// once it ends in data, or -1. At the end of the stream (atEOF) a
	// non-empty unit always ends.
	split(data []byte, atEOF bool) int
	// keep is how many of the unit's first bytes the splitter still
	// needs: the reader may drop the others of a unit over the limit.
	keep() int
	// drop tells the splitter the unit's first n bytes were dropped.
	drop(n int)
}

// unit is what readUnit found.
type unit struct {
	start int64  // its stream offset
	n     int64  // its length
	raw   []byte // its bytes in the window, valid until the next read; nil when over the limit
	lines int64  // the line feeds in it
	byEOF bool   // it ended because the stream did, not by its own end
	stuck bool   // the splitter needed more than the window holds: raw is nil, the unit unfinished
}

// readUnit reads one unit from the read position with sp, which the
// caller has set for a new unit, and consumes it. It reports false at
// the end of the stream, when no byte is left. A unit longer than the
// limit is scanned to its end without being held: its bytes are dropped
// as they pass, and raw is nil.
func (r *Reader) readUnit(sp splitter) (unit, bool, error) {
	u := unit{start: r.src.offset()}
	var dropped int64
	for {
		data := r.src.data()
		atEOF := r.src.ended()
		// Split as if more were coming first, so that a unit the stream
		// ends just after its own end is not taken as cut short by it.
		end := sp.split(data, false)
		if end < 0 && atEOF {
			end = sp.split(data, true)
			u.byEOF = end >= 0
		}
		if end >= 0 {
			u.n = dropped + int64(end)
			u.lines += int64(bytes.Count(data[:end], newline))
			if dropped == 0 && u.n <= r.limit {
				u.raw = data[:end]
			}
			r.src.consume(end)
			return u, true, nil
		}
		if atEOF {
			if r.src.ioErr != nil {
				return u, false, r.src.ioErr
			}
			return u, false, nil // sp ends every non-empty unit at EOF
		}
		if dropped+int64(len(data)) > r.limit {
			// One byte stays, so that the splitter still sees the unit
			// it is in when the stream ends.
			if k := min(sp.keep(), len(data)-1); k > 0 {
				u.lines += int64(bytes.Count(data[:k], newline))
				r.src.consume(k)
				sp.drop(k)
				dropped += int64(k)
			}
		}
		if !r.src.fill() && !r.src.ended() {
			// The window is full and the splitter needs all of it: one
			// piece of XML markup longer than the window.
			data = r.src.data()
			u.lines += int64(bytes.Count(data, newline))
			u.n = dropped + int64(len(data))
			u.stuck = true
			r.src.consume(len(data))
			return u, true, nil
		}
	}
}

var newline = []byte{'\n'}

// record starts the Record of unit u, which began on line.
func (r *Reader) record(u unit, line int64) Record {
	return Record{
		File: r.name, Index: r.index, Line: line,
		Start: u.start, End: u.start + u.n,
		next: Position{Record: r.index + 1, Offset: u.start + u.n, Line: r.line},
	}
}

// owned copies raw, and text after it, into one new allocation; when
// text is raw[off:off+len(text)] (off >= 0), as it is for a UTF-8 file,
// the copy of text shares the copy of raw instead.
func owned(raw, text []byte, off int) (ownRaw, ownText []byte) {
	if off >= 0 {
		b := bytes.Clone(raw)
		return b, b[off : off+len(text) : off+len(text)]
	}
	b := make([]byte, len(raw)+len(text))
	copy(b, raw)
	copy(b[len(raw):], text)
	return b[:len(raw):len(raw)], b[len(raw):]
}

// within returns the offset of sub in b when sub is a sub-slice of b
// (their first bytes are one), else -1.
func within(b, sub []byte, start int) int {
	if len(sub) > 0 && len(b) > start && &b[start] == &sub[0] {
		return start
	}
	return -1
}

// fail makes rec a failure with reason parse, its detail after its origin.
func (r *Reader) fail(rec *Record, format string, args ...any) {
	rec.Err = &spool.RejectError{Reason: spool.ReasonParse, Detail: rec.Origin() + ": " + fmt.Sprintf(format, args...)}
	rec.JSON = nil
}

// tooLarge makes rec a too-large failure.
func (r *Reader) tooLarge(rec *Record) {
	rec.Raw, rec.JSON = nil, nil
	rec.Err = &spool.RejectError{Reason: spool.ReasonTooLarge,
		Detail: fmt.Sprintf("%s: a record of %d bytes, over the limit of %d bytes", rec.Origin(), rec.End-rec.Start, r.limit)}
}

// elementNext is the Element an XML record read now would have.
func (r *Reader) elementNext() int64 {
	if r.kind == XML {
		return r.xml.elements + 1
	}
	return 0
}

// tail makes the failure of the rest of the file, from the start of u:
// the unit read last, whose u.n bytes are consumed and counted already
// (an empty unit at the read position when the failure starts there).
// It reads the stream to its end, keeping at most the limit of its bytes
// for the tail's dead letter, so that End is the end of the file.
func (r *Reader) tail(u unit, line, element int64, detail string) (Record, error) {
	rec := Record{File: r.name, Index: r.index, Line: line, Element: element, Start: u.start, Tail: true, Whole: r.index == 0}
	keep := !r.light && (u.n == 0 || u.raw != nil)
	var raw []byte
	if keep {
		raw = append(raw, u.raw...)
	}
	n := u.n
	for {
		d := r.src.data()
		n += int64(len(d))
		if keep && int64(len(raw)+len(d)) <= r.limit {
			raw = append(raw, d...)
		} else {
			keep, raw = false, nil
		}
		r.line += int64(bytes.Count(d, newline))
		r.src.consume(len(d))
		if !r.src.fill() {
			if r.src.ioErr != nil {
				return Record{}, r.src.ioErr
			}
			if r.src.ended() {
				break
			}
		}
	}
	rec.End = u.start + n
	rec.Raw = raw
	rec.next = Position{Record: r.index + 1, Offset: rec.End, Line: r.line}
	if r.src.broken != nil && !strings.Contains(detail, "gzip") {
		detail += "; then " + r.src.brokenDetail()
	}
	if !rec.Whole {
		detail = rec.Origin() + ": " + detail
	}
	rec.Err = &spool.RejectError{Reason: spool.ReasonParse, Detail: detail}
	return rec, nil
}
