package spool

import (
	"bytes"
	"fmt"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds the strict JSON (RFC 8259) scanner behind Contract.Parse.
//
// It is hand-written rather than built on encoding/json for three reasons the
// consumer's hot path cares about: it rejects what encoding/json lets through
// (invalid UTF-8 inside strings, duplicate keys, nesting past MaxDepth), it
// reports the byte offset of every syntax error, and it checks a message in a
// single pass without building a map[string]any, so a valid message costs a
// handful of allocations. It is iterative over the bytes and recursive only
// over nesting, which MaxDepth bounds, so a hostile file cannot exhaust the
// stack; every buffer it grows is proportional to the input.

// dupLinearMax is how many keys an object may hold before duplicate keys are
// found with a map instead of comparing each new key with all earlier ones:
// linear comparison allocates nothing and wins for message-sized objects, the
// map keeps a hostile object with 100k keys linear in time.
const dupLinearMax = 16

// keySpan locates one decoded key in scanner.keys.
type keySpan struct{ start, end int }

// member is one top-level member of the object: its decoded name in
// scanner.keys and its value's bytes in scanner.data.
type member struct {
	keyStart, keyEnd int
	valStart, valEnd int
	kind             Kind
}

// scanner checks one JSON text. Its buffers are reused through scannerPool,
// so a scanner must not be retained past the call that got it.
type scanner struct {
	data []byte
	pos  int

	// err is the first syntax error, one line with its byte offset; empty
	// while the text is valid so far.
	err string

	// keys holds the decoded keys of the objects currently open, back to
	// back; spans locates them. An object's keys are dropped when it closes,
	// except the top-level object's, which become the message's field names.
	keys  []byte
	spans []keySpan

	// members are the top-level object's members, in document order.
	members []member

	// dup is set at the first key that repeats within one object, wherever
	// it is nested; dupKey is that key, decoded. Scanning goes on, because a
	// syntax error later in the file still makes the message a parse error.
	dup    bool
	dupKey string

	// lone is the offset of the first lone surrogate escape str met since
	// it was last set to -1; decodeString resets it, so that after one
	// string's decoding it says whether that string had one.
	lone int
}

// scannerPool recycles scanners so that their buffers are allocated once per
// worker instead of once per message.
var scannerPool = sync.Pool{New: func() any { return new(scanner) }}

// Retention caps for pooled buffers: one huge message must not pin its
// buffers in memory for the life of the process.
const (
	poolMaxKeys    = 64 << 10
	poolMaxSpans   = 4 << 10
	poolMaxMembers = 1 << 10
)

func getScanner(data []byte) *scanner {
	s := scannerPool.Get().(*scanner)
	s.data, s.pos, s.err = data, 0, ""
	s.keys, s.spans, s.members = s.keys[:0], s.spans[:0], s.members[:0]
	s.dup, s.dupKey, s.lone = false, "", -1
	return s
}

func putScanner(s *scanner) {
	if cap(s.keys) > poolMaxKeys || cap(s.spans) > poolMaxSpans || cap(s.members) > poolMaxMembers {
		return
	}
	s.data = nil // do not keep the caller's message alive
	scannerPool.Put(s)
}

// scan checks that s.data is exactly one JSON value surrounded by optional
// whitespace, and returns the kind of that value. When the value is an
// object its members are left in s.members. On a syntax error it returns
// false with s.err set.
func (s *scanner) scan() (Kind, bool) {
	s.skipWS()
	kind, ok := s.value(0)
	if !ok {
		return "", false
	}
	s.skipWS()
	if s.pos < len(s.data) {
		if msg, bad := s.invalidUTF8(s.pos); bad {
			s.err = msg
		} else {
			s.err = fmt.Sprintf("trailing data at offset %d", s.pos)
		}
		return "", false
	}
	return kind, true
}

// value scans one value at s.pos; depth is the number of arrays and objects
// enclosing it.
func (s *scanner) value(depth int) (Kind, bool) {
	if s.pos >= len(s.data) {
		return "", s.eof("looking for beginning of value")
	}
	switch c := s.data[s.pos]; c {
	case '{':
		return KindObject, s.object(depth + 1)
	case '[':
		return KindArray, s.array(depth + 1)
	case '"':
		return KindString, s.str(nil)
	case 't':
		return KindBoolean, s.literal("true")
	case 'f':
		return KindBoolean, s.literal("false")
	case 'n':
		return KindNull, s.literal("null")
	default:
		if c == '-' || ('0' <= c && c <= '9') {
			n, kind, ok := scanNumber(s.data[s.pos:])
			s.pos += n
			if !ok {
				if s.pos >= len(s.data) {
					return "", s.eof("in numeric literal")
				}
				return "", s.badChar(s.pos, "in numeric literal")
			}
			return kind, true
		}
		return "", s.badChar(s.pos, "looking for beginning of value")
	}
}

// object scans an object at s.pos ('{'), finding duplicate keys as it goes.
// depth counts this object.
func (s *scanner) object(depth int) bool {
	if depth > MaxDepth {
		return s.fail(fmt.Sprintf("nesting deeper than %d levels at offset %d", MaxDepth, s.pos))
	}
	s.pos++
	top := depth == 1
	keyBase, spanBase := len(s.keys), len(s.spans)
	var seen map[string]struct{} // only for objects with many keys
	s.skipWS()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return true
	}
	for {
		if s.pos >= len(s.data) {
			return s.eof("looking for beginning of object key string")
		}
		if s.data[s.pos] != '"' {
			return s.badChar(s.pos, "looking for beginning of object key string")
		}
		keyStart := len(s.keys)
		if !s.str(&s.keys) {
			return false
		}
		key := s.keys[keyStart:]
		if !s.dup {
			switch {
			case seen != nil:
				if _, ok := seen[string(key)]; ok {
					s.dup, s.dupKey = true, string(key)
				} else {
					seen[string(key)] = struct{}{}
				}
			default:
				for _, sp := range s.spans[spanBase:] {
					if bytes.Equal(s.keys[sp.start:sp.end], key) {
						s.dup, s.dupKey = true, string(key)
						break
					}
				}
				if !s.dup && len(s.spans)-spanBase >= dupLinearMax {
					seen = make(map[string]struct{}, 2*dupLinearMax)
					for _, sp := range s.spans[spanBase:] {
						seen[string(s.keys[sp.start:sp.end])] = struct{}{}
					}
					seen[string(key)] = struct{}{}
				}
			}
		}
		s.spans = append(s.spans, keySpan{keyStart, len(s.keys)})

		s.skipWS()
		if s.pos >= len(s.data) {
			return s.eof("after object key")
		}
		if s.data[s.pos] != ':' {
			return s.badChar(s.pos, "after object key")
		}
		s.pos++
		s.skipWS()
		valStart := s.pos
		kind, ok := s.value(depth)
		if !ok {
			return false
		}
		if top {
			s.members = append(s.members, member{keyStart, keyStart + len(key), valStart, s.pos, kind})
		}

		s.skipWS()
		if s.pos >= len(s.data) {
			return s.eof("after object key:value pair")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.skipWS()
		case '}':
			s.pos++
			if !top {
				// The top-level keys stay: they are the message's field names,
				// and every nested object's keys above them are gone by now.
				s.keys, s.spans = s.keys[:keyBase], s.spans[:spanBase]
			}
			return true
		default:
			return s.badChar(s.pos, "after object key:value pair")
		}
	}
}

// array scans an array at s.pos ('['); depth counts this array.
func (s *scanner) array(depth int) bool {
	if depth > MaxDepth {
		return s.fail(fmt.Sprintf("nesting deeper than %d levels at offset %d", MaxDepth, s.pos))
	}
	s.pos++
	s.skipWS()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return true
	}
	for {
		if _, ok := s.value(depth); !ok {
			return false
		}
		s.skipWS()
		if s.pos >= len(s.data) {
			return s.eof("after array element")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.skipWS()
		case ']':
			s.pos++
			return true
		default:
			return s.badChar(s.pos, "after array element")
		}
	}
}

// str scans a string at s.pos ('"'). When dst is not nil it appends the
// decoded content to *dst: escapes resolved, a surrogate pair joined, a lone
// surrogate escape replaced by U+FFFD as encoding/json does, its offset
// noted in s.lone (RFC 8259 allows the escape, but it names no character:
// "k\ud800" and "k\udbff" would decode alike, so a key holding one is
// refused by Parse). Raw bytes must be valid UTF-8 (RFC 8259 section 8.1);
// encoding/json replaces invalid bytes silently, which would let two
// different files carry the same msg_id.
func (s *scanner) str(dst *[]byte) bool {
	data := s.data
	i := s.pos + 1
	run := i // start of the bytes not yet copied to dst
	for {
		for i < len(data) {
			if c := data[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			i++
		}
		if i >= len(data) {
			s.pos = i
			return s.eof("in string literal")
		}
		switch c := data[i]; {
		case c == '"':
			if dst != nil {
				*dst = append(*dst, data[run:i]...)
			}
			s.pos = i + 1
			return true
		case c == '\\':
			if dst != nil {
				*dst = append(*dst, data[run:i]...)
			}
			if i+1 >= len(data) {
				s.pos = len(data)
				return s.eof("in string escape code")
			}
			var b byte
			switch data[i+1] {
			case '"', '\\', '/':
				b = data[i+1]
			case 'b':
				b = '\b'
			case 'f':
				b = '\f'
			case 'n':
				b = '\n'
			case 'r':
				b = '\r'
			case 't':
				b = '\t'
			case 'u':
				r, ok := s.hex4(i + 2)
				if !ok {
					return false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// Join a high surrogate with the low one that follows;
					// anything else is a lone surrogate.
					r2, ok := hex4At(data, i)
					if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
						if s.lone < 0 {
							s.lone = i - 6
						}
					}
				}
				if dst != nil {
					*dst = utf8.AppendRune(*dst, r)
				}
				run = i
				continue
			default:
				return s.badChar(i+1, "in string escape code")
			}
			if dst != nil {
				*dst = append(*dst, b)
			}
			i += 2
			run = i
		case c < 0x20:
			return s.badChar(i, "in string literal")
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return s.fail(fmt.Sprintf("invalid UTF-8 at offset %d", i))
			}
			i += size
		}
	}
}

// hex4 reads the four hex digits of a \u escape starting at offset i.
func (s *scanner) hex4(i int) (rune, bool) {
	for j := i; j < i+4; j++ {
		if j >= len(s.data) {
			s.pos = len(s.data)
			return 0, s.eof(`in \u hexadecimal character escape`)
		}
		if hexVal(s.data[j]) < 0 {
			return 0, s.badChar(j, `in \u hexadecimal character escape`)
		}
	}
	r, _ := hex4At(s.data, i-2)
	return r, true
}

// hex4At decodes a complete `\uXXXX` escape at offset i, if there is one.
func hex4At(data []byte, i int) (rune, bool) {
	if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range data[i+2 : i+6] {
		v := hexVal(c)
		if v < 0 {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

func hexVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// literal scans true, false or null at s.pos.
func (s *scanner) literal(word string) bool {
	for k := 0; k < len(word); k++ {
		i := s.pos + k
		if i >= len(s.data) {
			s.pos = i
			return s.eof("in literal " + word)
		}
		if s.data[i] != word[k] {
			return s.badChar(i, fmt.Sprintf("in literal %s (expecting %q)", word, word[k]))
		}
	}
	s.pos += len(word)
	return true
}

// scanNumber reads the JSON number at the start of b:
//
//	-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
//
// It returns the number's length and kind (integer when there is neither a
// fraction nor an exponent). When b does not start with a number, n is the
// offset of the first byte that breaks the syntax (len(b) when b ends too
// soon) and ok is false. Money depends on it: an amount string is accepted
// only when it is one number exactly.
func scanNumber(b []byte) (n int, kind Kind, ok bool) {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, "", false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i++
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return i, "", false
	}
	kind = KindInteger
	if i < len(b) && b[i] == '.' {
		kind = KindNumber
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, "", false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		kind = KindNumber
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, "", false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, kind, true
}

// isJSONNumber reports whether b is exactly one JSON number, nothing around it.
func isJSONNumber(b []byte) bool {
	n, _, ok := scanNumber(b)
	return ok && n == len(b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func (s *scanner) skipWS() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// fail records the first syntax error and returns false, so that callers
// can write `return s.fail(...)`.
func (s *scanner) fail(msg string) bool {
	if s.err == "" {
		s.err = msg
	}
	return false
}

// eof reports input that ended inside a value.
func (s *scanner) eof(context string) bool {
	return s.fail(fmt.Sprintf("unexpected end of input %s at offset %d", context, len(s.data)))
}

// badChar reports the byte at offset i, which cannot appear there. A byte
// that starts no valid UTF-8 sequence is reported as such, so that an
// operator sees the file's real problem.
func (s *scanner) badChar(i int, context string) bool {
	if msg, bad := s.invalidUTF8(i); bad {
		return s.fail(msg)
	}
	r, _ := utf8.DecodeRune(s.data[i:])
	if r == '\uFEFF' && i == 0 {
		// Windows PowerShell 5's Out-File -Encoding utf8 and some
		// editors write one; JSON forbids it, and spool reads a message
		// strictly (docs/DESIGN.md, "Why so strict").
		return s.fail(fmt.Sprintf("invalid character U+FEFF (byte order mark) %s at offset %d: JSON allows none; write it as UTF-8 without one (PowerShell 5's Out-File -Encoding utf8 writes one)", context, i))
	}
	if r == '\uFEFF' {
		return s.fail(fmt.Sprintf("invalid character U+FEFF (byte order mark) %s at offset %d", context, i))
	}
	return s.fail(fmt.Sprintf("invalid character %q %s at offset %d", r, context, i))
}

// invalidUTF8 describes the byte at offset i when it starts no valid UTF-8
// sequence.
func (s *scanner) invalidUTF8(i int) (string, bool) {
	if s.data[i] < utf8.RuneSelf {
		return "", false
	}
	if r, size := utf8.DecodeRune(s.data[i:]); r != utf8.RuneError || size != 1 {
		return "", false
	}
	return fmt.Sprintf("invalid UTF-8 at offset %d", i), true
}
