package batch

import (
	"bytes"

	"github.com/spoolq/spool"
)

// lineSplit splits at line feeds: a JSON Lines record, a CSV comment line.
type lineSplit struct{ pos int }

func (s *lineSplit) split(data []byte, atEOF bool) int {
	if i := bytes.IndexByte(data[s.pos:], '\n'); i >= 0 {
		end := s.pos + i + 1
		s.pos = 0
		return end
	}
	s.pos = len(data)
	if atEOF && len(data) > 0 {
		s.pos = 0
		return len(data)
	}
	return -1
}

func (s *lineSplit) keep() int  { return s.pos }
func (s *lineSplit) drop(n int) { s.pos -= n }

// wholeSplit takes the whole stream as one unit: the JSON format.
type wholeSplit struct{ seen int }

func (s *wholeSplit) split(data []byte, atEOF bool) int {
	s.seen = len(data)
	if atEOF {
		return len(data)
	}
	return -1
}

func (s *wholeSplit) keep() int  { return s.seen }
func (s *wholeSplit) drop(n int) { s.seen -= n }

// trimLineEnd drops a line's line feed and the carriage return before it.
func trimLineEnd(line []byte) []byte {
	line = bytes.TrimSuffix(line, newline)
	return bytes.TrimSuffix(line, []byte{'\r'})
}

// blank reports whether a line holds only JSON whitespace.
func blank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// nextJSONL reads the next non-blank line as a record: one JSON object,
// whitespace around it allowed. A line that is not one object is that
// record's failure; the next line is read as ever.
func (r *Reader) nextJSONL() (Record, bool, error) {
	for {
		line := r.line
		u, ok, err := r.readUnit(&r.jsonl)
		if err != nil || !ok {
			return Record{}, false, err
		}
		r.line += u.lines
		if u.raw != nil && blank(u.raw) {
			continue // whitespace, and a damaged gzip stream is found on the next read
		}
		rec := r.record(u, line)
		switch {
		case u.byEOF && r.src.broken != nil:
			rec, err := r.tail(u, line, 0, r.src.brokenDetail())
			return rec, err == nil, err
		case u.raw == nil:
			r.tooLarge(&rec)
			return rec, true, nil
		case r.light:
			return rec, true, nil
		}
		content := trimLineEnd(u.raw)
		text, bad := r.dec.decode(content)
		if bad != nil {
			rec.Raw = bytes.Clone(u.raw)
			r.fail(&rec, "%s", bad.describe(r.cs))
			return rec, true, nil
		}
		// A byte order mark at a line's start: files joined into one,
		// each with its mark (Windows tools write them). Each line is a
		// JSON text, which RFC 8259 lets a parser read past its mark.
		skip := 0
		if bytes.HasPrefix(text, bomUTF8) {
			skip = len(bomUTF8)
		}
		if msg := checkObject(text[skip:]); msg != "" {
			rec.Raw = bytes.Clone(u.raw)
			r.fail(&rec, "%s", msg)
			return rec, true, nil
		}
		lead := len(text) - len(bytes.TrimLeft(text[skip:], " \t\r\n"))
		obj := bytes.TrimRight(text[lead:], " \t\r\n")
		rec.Raw, rec.JSON = owned(u.raw, obj, within(u.raw, obj, lead))
		return rec, true, nil
	}
}

// nextWhole reads the JSON format's one record: the whole file, as today.
// Its bytes go to Contract.Parse unchecked (an empty file, a byte order
// mark, anything that is not an object fail there, as they always have),
// decoded first when the encoding is not UTF-8.
func (r *Reader) nextWhole() (Record, bool, error) {
	if r.index > 0 {
		return Record{}, false, nil
	}
	u, ok, err := r.readUnit(&r.whole)
	if err != nil {
		return Record{}, false, err
	}
	if !ok {
		u = unit{start: r.src.offset(), raw: []byte{}}
	}
	r.line += u.lines
	rec := r.record(u, 1)
	switch {
	case r.src.broken != nil:
		rec, err := r.tail(u, 1, 0, r.src.brokenDetail())
		return rec, err == nil, err
	case u.raw == nil:
		r.tooLarge(&rec)
		return rec, true, nil
	case r.light:
		return rec, true, nil
	}
	text := u.raw
	if r.cs.enc != nil {
		var bad *invalidSeq
		if text, bad = r.dec.decode(u.raw); bad != nil {
			rec.Raw = bytes.Clone(u.raw)
			rec.Err = &spool.RejectError{Reason: spool.ReasonParse, Detail: bad.describe(r.cs)}
			return rec, true, nil
		}
	}
	rec.Raw, rec.JSON = owned(u.raw, text, within(u.raw, text, 0))
	return rec, true, nil
}
