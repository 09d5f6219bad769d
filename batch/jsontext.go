package batch

import (
	"bytes"
	"fmt"
	"slices"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/spoolq/spool"
)

// This file is the reader's JSON: the check that a JSON Lines line is one
// object, the string writer that builds the canonical objects of CSV and
// XML records, and the canonical form a hashed key is computed on. The
// contract's own parser (spool.Contract.Parse) still checks every record
// afterwards; the check here exists so that a line that is not an object
// fails as that line, in the words of a file with lines, before the
// contract sees it.

// hexDigits writes \u escapes.
const hexDigits = "0123456789abcdef"

// appendString appends s, valid UTF-8, as a JSON string in the one
// canonical escaping: the quote and the backslash escaped, control
// characters as \b \t \n \f \r or \u00XX, everything else as it is.
func appendString(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = appendEscape(dst, rune(c))
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendEscape appends the canonical escape of an ASCII character that
// must be escaped (a control character, the quote or the backslash), or
// of a surrogate code unit that stands alone.
func appendEscape(dst []byte, c rune) []byte {
	switch c {
	case '"':
		return append(dst, '\\', '"')
	case '\\':
		return append(dst, '\\', '\\')
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', hexDigits[c>>12&0xF], hexDigits[c>>8&0xF], hexDigits[c>>4&0xF], hexDigits[c&0xF])
}

// jsonText walks one JSON text strictly (RFC 8259); with out set it also
// writes the value's canonical form there.
type jsonText struct {
	data []byte
	pos  int
	err  string // the first error, with its position
	// canon makes value write the canonical form to out: no whitespace,
	// each object's members sorted by name, strings in appendString's
	// escaping, numbers and literals as written.
	canon bool
	out   []byte
}

// checkObject returns "" when line (valid UTF-8, its line break removed)
// is exactly one JSON object with optional whitespace around it, and
// otherwise what is wrong, with the character (column) where it is.
// Duplicate keys are left to the contract, whose rejection names the key.
func checkObject(line []byte) string {
	j := jsonText{data: line}
	j.ws()
	if j.pos == len(line) {
		return "not a JSON object, the line is empty"
	}
	if c := line[j.pos]; c != '{' {
		if j.value(0) {
			return fmt.Sprintf("not a JSON object, found %s", kindName(c))
		}
		return j.err
	}
	if !j.value(0) {
		return j.err
	}
	end := j.pos
	j.ws()
	if j.pos != len(line) {
		if bytes.IndexByte(line[end:j.pos], '\r') >= 0 {
			// Lines that end with CR alone (classic Mac OS) read as one.
			return fmt.Sprintf("data after the object at column %d, after a carriage return: the file's lines end with CR alone, which JSON Lines does not take as line ends (convert them to LF)", j.column())
		}
		return fmt.Sprintf("data after the object at column %d", j.column())
	}
	return ""
}

// canonicalJSON returns the canonical form of data, one JSON value:
// whitespace dropped, members sorted by name at every level, strings
// re-escaped canonically (so "\u0041" and "A" are one), numbers kept as
// written (1.0 and 1 differ: money is never rounded). It fails on
// anything that is not one JSON value, and on a name that repeats within
// an object, which has no canonical form.
func canonicalJSON(data []byte) ([]byte, error) {
	j := jsonText{data: data, canon: true, out: make([]byte, 0, len(data))}
	j.ws()
	ok := j.value(0)
	j.ws()
	if ok && j.pos != len(data) {
		ok, j.err = false, fmt.Sprintf("data after the value at column %d", j.column())
	}
	if !ok {
		return nil, fmt.Errorf("canonical form: %s", j.err)
	}
	return j.out, nil
}

// kindName names the JSON kind a value starting with c would be.
func kindName(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// column is the 1-based character position of j.pos.
func (j *jsonText) column() int { return utf8.RuneCount(j.data[:j.pos]) + 1 }

func (j *jsonText) fail(format string, args ...any) bool {
	if j.err == "" {
		j.err = fmt.Sprintf(format, args...) + fmt.Sprintf(" at column %d", j.column())
	}
	return false
}

func (j *jsonText) ws() {
	for j.pos < len(j.data) {
		switch j.data[j.pos] {
		case ' ', '\t', '\r', '\n':
			j.pos++
		default:
			return
		}
	}
}

// value walks one value at j.pos, nested depth deep.
func (j *jsonText) value(depth int) bool {
	if j.pos == len(j.data) {
		return j.fail("unexpected end of the text")
	}
	switch c := j.data[j.pos]; {
	case c == '{':
		return j.object(depth + 1)
	case c == '[':
		return j.array(depth + 1)
	case c == '"':
		return j.str()
	case c == '-' || c >= '0' && c <= '9':
		return j.number()
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(j.data[j.pos:], []byte(lit)) {
			j.pos += len(lit)
			if j.canon {
				j.out = append(j.out, lit...)
			}
			return true
		}
	}
	r, _ := utf8.DecodeRune(j.data[j.pos:])
	return j.fail("invalid character %q", r)
}

// member locates one name and value of an object being canonicalised
// in jsonText.out, where they are written back to back: the name's
// canonical form from name to value, the value's from value to end.
type member struct{ name, value, end int }

func (j *jsonText) object(depth int) bool {
	if depth > spool.MaxDepth {
		return j.fail("nesting deeper than %d", spool.MaxDepth)
	}
	j.pos++ // {
	start := len(j.out)
	var small [8]member
	members := small[:0]
	j.ws()
	if j.pos < len(j.data) && j.data[j.pos] == '}' {
		j.pos++
		if j.canon {
			j.out = append(j.out, '{', '}')
		}
		return true
	}
	for {
		j.ws()
		if j.pos == len(j.data) || j.data[j.pos] != '"' {
			if j.pos == len(j.data) {
				return j.fail("unexpected end of the text")
			}
			return j.fail("want a member name in quotes")
		}
		m := member{name: len(j.out)}
		if !j.str() {
			return false
		}
		m.value = len(j.out)
		j.ws()
		if j.pos == len(j.data) || j.data[j.pos] != ':' {
			return j.fail("want a colon after the member name")
		}
		j.pos++
		j.ws()
		if !j.value(depth) {
			return false
		}
		m.end = len(j.out)
		if j.canon {
			members = append(members, m)
		}
		j.ws()
		if j.pos == len(j.data) {
			return j.fail("unexpected end of the text")
		}
		c := j.data[j.pos]
		j.pos++
		if c == '}' {
			break
		}
		if c != ',' {
			j.pos--
			return j.fail("want a comma or } after a member")
		}
	}
	if j.canon {
		name := func(m member) []byte { return j.out[m.name:m.value] }
		slices.SortFunc(members, func(a, b member) int { return bytes.Compare(name(a), name(b)) })
		sorted := make([]byte, 0, len(j.out)-start+len(members)+2)
		sorted = append(sorted, '{')
		for i, m := range members {
			if i > 0 {
				if bytes.Equal(name(m), name(members[i-1])) {
					return j.fail("the name %s repeats in an object", name(m))
				}
				sorted = append(sorted, ',')
			}
			sorted = append(append(append(sorted, name(m)...), ':'), j.out[m.value:m.end]...)
		}
		j.out = append(append(j.out[:start], sorted...), '}')
	}
	return true
}

func (j *jsonText) array(depth int) bool {
	if depth > spool.MaxDepth {
		return j.fail("nesting deeper than %d", spool.MaxDepth)
	}
	j.pos++ // [
	if j.canon {
		j.out = append(j.out, '[')
	}
	j.ws()
	if j.pos < len(j.data) && j.data[j.pos] == ']' {
		j.pos++
		if j.canon {
			j.out = append(j.out, ']')
		}
		return true
	}
	for {
		j.ws()
		if !j.value(depth) {
			return false
		}
		j.ws()
		if j.pos == len(j.data) {
			return j.fail("unexpected end of the text")
		}
		c := j.data[j.pos]
		j.pos++
		if j.canon {
			j.out = append(j.out, c)
		}
		if c == ']' {
			return true
		}
		if c != ',' {
			j.pos--
			return j.fail("want a comma or ] after an element")
		}
	}
}

// str walks a string; in canonical mode it writes it re-escaped.
func (j *jsonText) str() bool {
	j.pos++ // "
	if j.canon {
		j.out = append(j.out, '"')
	}
	start := j.pos
	flush := func() {
		if j.canon {
			j.out = append(j.out, j.data[start:j.pos]...)
		}
	}
	for j.pos < len(j.data) {
		c := j.data[j.pos]
		switch {
		case c == '"':
			flush()
			j.pos++
			if j.canon {
				j.out = append(j.out, '"')
			}
			return true
		case c < 0x20:
			return j.fail("control character %q in a string", rune(c))
		case c == '\\':
			flush()
			if !j.escape() {
				return false
			}
			start = j.pos
		default:
			j.pos++
		}
	}
	return j.fail("unexpected end of the text in a string")
}

// escape walks one escape at j.pos and writes what it stands for.
func (j *jsonText) escape() bool {
	if j.pos+1 >= len(j.data) {
		j.pos = len(j.data)
		return j.fail("unexpected end of the text in an escape")
	}
	switch e := j.data[j.pos+1]; e {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		j.pos += 2
		if j.canon {
			if e == '/' {
				j.out = append(j.out, '/')
			} else {
				j.out = append(j.out, '\\', e) // the short forms are canonical
			}
		}
		return true
	case 'u':
		r, ok := j.hex4(j.pos + 2)
		if !ok {
			return j.fail("invalid \\u escape")
		}
		j.pos += 6
		if utf16.IsSurrogate(r) {
			if r2, ok := j.hex4(j.pos + 2); ok && r < 0xDC00 && j.pos+1 < len(j.data) && j.data[j.pos] == '\\' && j.data[j.pos+1] == 'u' {
				if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
					j.pos += 6
					if j.canon {
						j.out = utf8.AppendRune(j.out, pair)
					}
					return true
				}
			}
			if j.canon {
				j.out = appendEscape(j.out, r) // a lone surrogate: no character to write
			}
			return true
		}
		if j.canon {
			if r < 0x20 || r == '"' || r == '\\' {
				j.out = appendEscape(j.out, r)
			} else {
				j.out = utf8.AppendRune(j.out, r)
			}
		}
		return true
	}
	j.pos++
	return j.fail("invalid escape")
}

// hex4 reads the four hex digits at i.
func (j *jsonText) hex4(i int) (rune, bool) {
	if i+4 > len(j.data) {
		return 0, false
	}
	var r rune
	for _, c := range j.data[i : i+4] {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// number walks a number in RFC 8259's grammar.
func (j *jsonText) number() bool {
	start := j.pos
	digits := func() int {
		n := 0
		for j.pos < len(j.data) && j.data[j.pos] >= '0' && j.data[j.pos] <= '9' {
			j.pos++
			n++
		}
		return n
	}
	if j.data[j.pos] == '-' {
		j.pos++
	}
	if j.pos < len(j.data) && j.data[j.pos] == '0' {
		j.pos++
	} else if digits() == 0 {
		return j.fail("invalid number")
	}
	if j.pos < len(j.data) && j.data[j.pos] == '.' {
		j.pos++
		if digits() == 0 {
			return j.fail("invalid number: want a digit after the point")
		}
	}
	if j.pos < len(j.data) && (j.data[j.pos] == 'e' || j.data[j.pos] == 'E') {
		j.pos++
		if j.pos < len(j.data) && (j.data[j.pos] == '+' || j.data[j.pos] == '-') {
			j.pos++
		}
		if digits() == 0 {
			return j.fail("invalid number: want a digit in the exponent")
		}
	}
	if j.canon {
		j.out = append(j.out, j.data[start:j.pos]...)
	}
	return true
}
