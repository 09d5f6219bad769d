package batch

import (
	"bytes"

	"github.com/spoolq/spool"
)

// The XML of a batch file is split by this lexer, in the file's bytes,
// and each record alone is then decoded and parsed by encoding/xml's
// Decoder.Token (xmlrecord.go). encoding/xml cannot split the file
// itself: its Decoder stops for good at the first syntax error, where
// a bad record must fail alone and reading go on at the next record, and
// its offsets are in the decoded text, where a record's must be in the
// file (charset.go). The lexer knows only what it needs to find the
// records: tags and their names, comments, CDATA sections, processing
// instructions and the DOCTYPE, quotes inside tags; encoding/xml checks
// everything else of a record.
//
// A record is the element from its start tag to the end tag that closes
// it, found by the names of the elements open inside it. When its tags
// do not match, it still ends, as a failure, where the lexer can tell:
// at its own end tag, or just before the end tag of an element around
// it (so a record missing its end tag takes the records after it in the
// same parent into its failure). Outside the records the lexer checks
// that the document is well-formed enough to go on: tags that match, one
// root, nothing but white space, comments and processing instructions
// outside it. What breaks that, or a record the file ends inside, is one
// failure from there to the end of the file (Record.Tail).

// construct is the piece of markup the lexer is inside.
type construct int

const (
	cNone construct = iota
	cComment
	cCDATA
	cPI
	cDoctype
	cTag
	cEndTag
)

// xmlUnit is what a unit split by xmlSplit was.
type xmlUnit int

const (
	uText   xmlUnit = iota // character data outside the records
	uMarkup                // a comment, a processing instruction, the DOCTYPE
	uOpen                  // a start tag outside the records
	uClose                 // an end tag outside the records
	uRecord                // a record
	uBad                   // markup the lexer cannot read on after
)

// xmlSplit is the splitter of XML units: outside the records one piece
// of text or markup at a time, and each record as a whole.
type xmlSplit struct {
	rec  []byte           // the records' local name, in the file's encoding
	step func([]byte) int // a multi-byte encoding's character length, nil for the others

	pos    int       // how far the unit is scanned
	c      construct // the construct being scanned, from cstart
	cstart int

	inRecord bool
	stack    [][]byte // the elements open inside the record, the record's first
	named    int      // the bytes of stack's names
	deep     int      // the elements open inside the record past stack (push)
	outer    [][]byte // the elements open around the records

	// What the unit just split was.
	kind     xmlUnit
	name     []byte // uOpen, uClose: the element's name
	empty    bool   // uOpen: an empty-element tag, nothing to close
	pi       bool   // uMarkup: a processing instruction
	byEnd    bool   // uRecord: it ended at the end of the file, not at an end tag
	byParent []byte // uRecord: it ended before this end tag of an element around it
	bad      string // uBad: what is wrong
}

func (s *xmlSplit) reset() {
	s.pos, s.c, s.cstart, s.inRecord, s.stack, s.named, s.deep = 0, cNone, 0, false, s.stack[:0], 0, 0
}

// maxNames bounds the names of open elements the lexer holds, inside a
// record and around the records: spool.MaxDepth of them, and this many
// bytes of them in all. Each is a copy, as the window moves on; without a
// bound a file of 30 MB of nested start tags held 480 MB.
const maxNames = 64 << 10

// push takes a start tag inside the record: its name onto the stack
// within the bounds, else counted (deep). Past them the record fails
// anyway (encoding/xml's decoding refuses nesting past spool.MaxDepth,
// and a record of that many long names is over the limit); its end is
// then found by counting the end tags until the stack is in reach again.
func (s *xmlSplit) push(name []byte) {
	if s.deep > 0 || len(s.stack) > spool.MaxDepth || s.named+len(name) > maxNames {
		s.deep++
		return
	}
	s.stack = append(s.stack, bytes.Clone(name))
	s.named += len(name)
}

func (s *xmlSplit) keep() int {
	switch s.c {
	case cTag, cEndTag, cDoctype:
		return s.cstart // rescanned whole when more comes: they are short
	}
	return s.pos
}

func (s *xmlSplit) drop(n int) { s.pos -= n; s.cstart -= n }

// finish ends the unit at end as kind.
func (s *xmlSplit) finish(end int, kind xmlUnit) int {
	s.kind = kind
	s.reset()
	return end
}

func (s *xmlSplit) fail(format string) int {
	s.bad = format
	return s.finish(s.cstart+1, uBad)
}

func (s *xmlSplit) split(data []byte, atEOF bool) int {
	s.byEnd, s.empty, s.pi, s.byParent = false, false, false, nil
	for {
		if s.c == cNone {
			if s.pos == len(data) {
				if s.inRecord && atEOF {
					s.byEnd = true
					return s.finish(len(data), uRecord)
				}
				return -1
			}
			if data[s.pos] != '<' {
				i := bytes.IndexByte(data[s.pos:], '<')
				if !s.inRecord {
					// Text outside the records is taken a chunk at a
					// time: no unit of it is over the limit.
					if i < 0 || i > chunk {
						return s.finish(min(len(data), chunk), uText)
					}
					return s.finish(s.pos+i, uText)
				}
				if i < 0 {
					s.pos = len(data)
					continue
				}
				s.pos += i
			}
			s.cstart = s.pos
			if s.c = classify(data[s.pos:]); s.c == cNone {
				if len(data)-s.pos < len("<![CDATA[") && !atEOF {
					return -1
				}
				if s.inRecord {
					s.pos++ // a stray <: encoding/xml will say what is wrong
					continue
				}
				return s.fail("invalid markup: < starts no tag, comment or declaration")
			}
			s.pos += markupOpen[s.c]
		}
		end, ok := s.scan(data, atEOF)
		if !ok {
			if !atEOF {
				return -1
			}
			if s.inRecord {
				s.byEnd = true
				return s.finish(len(data), uRecord)
			}
			return s.fail("the file ends inside markup")
		}
		c := s.c
		s.c, s.pos = cNone, end
		if done := s.construct(c, data, end); done >= 0 {
			return done
		}
	}
}

// markupOpen is how many bytes open each construct.
var markupOpen = map[construct]int{cComment: 4, cCDATA: 9, cPI: 2, cDoctype: 9, cTag: 1, cEndTag: 2}

// classify names the markup that data, starting with <, opens; cNone
// when it opens none or data is too short to tell.
func classify(data []byte) construct {
	switch {
	case bytes.HasPrefix(data, []byte("<!--")):
		return cComment
	case bytes.HasPrefix(data, []byte("<![CDATA[")):
		return cCDATA
	case bytes.HasPrefix(data, []byte("<!DOCTYPE")):
		return cDoctype
	case bytes.HasPrefix(data, []byte("<?")):
		return cPI
	case bytes.HasPrefix(data, []byte("</")):
		return cEndTag
	case len(data) > 1 && nameStart(data[1]):
		return cTag
	}
	return cNone
}

// nameStart reports whether c may start an XML name: a letter, _ or :,
// or any byte of a non-ASCII character.
func nameStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= 0x80
}

// scan finds the end of the construct s.c, which opened at s.cstart, and
// reports false when data ends first. Long comments, CDATA sections and
// processing instructions are scanned on from where the last call
// stopped; tags are rescanned whole.
func (s *xmlSplit) scan(data []byte, atEOF bool) (int, bool) {
	switch s.c {
	case cComment, cPI:
		term := []byte("-->")
		if s.c == cPI {
			term = []byte("?>")
		}
		if i := bytes.Index(data[s.pos:], term); i >= 0 {
			return s.pos + i + len(term), true
		}
		s.pos = max(s.pos, len(data)-len(term)+1)
		return 0, false
	case cCDATA:
		return s.cdataEnd(data, atEOF)
	case cDoctype:
		return doctypeEnd(data, s.cstart)
	case cEndTag:
		i := bytes.IndexByte(data[s.cstart:], '>')
		if i < 0 {
			return 0, false
		}
		return s.cstart + i + 1, true
	}
	var quote byte // cTag
	for i := s.cstart + 1; i < len(data); i++ {
		switch c := data[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '>':
			return i + 1, true
		}
	}
	return 0, false
}

// cdataEnd finds "]]>". In a multi-byte encoding ] may be the trail byte
// of a character, so the section is walked a character at a time there.
func (s *xmlSplit) cdataEnd(data []byte, atEOF bool) (int, bool) {
	term := []byte("]]>")
	if s.step == nil {
		if i := bytes.Index(data[s.pos:], term); i >= 0 {
			return s.pos + i + len(term), true
		}
		s.pos = max(s.pos, len(data)-len(term)+1)
		return 0, false
	}
	for s.pos < len(data) {
		if bytes.HasPrefix(data[s.pos:], term) {
			return s.pos + len(term), true
		}
		if len(data)-s.pos < len(term) && data[s.pos] == ']' && !atEOF {
			return 0, false
		}
		n := s.step(data[s.pos:])
		if n == 0 {
			if !atEOF {
				return 0, false
			}
			n = 1
		}
		s.pos += n
	}
	return 0, false
}

// doctypeEnd finds the end of a DOCTYPE opened at start: its > at depth
// 0, counting the < and > of the declarations of its internal subset and
// skipping quoted strings and comments, where < and > are text.
func doctypeEnd(data []byte, start int) (int, bool) {
	depth := 0
	for i := start; i < len(data); i++ {
		switch data[i] {
		case '"', '\'':
			j := bytes.IndexByte(data[i+1:], data[i])
			if j < 0 {
				return 0, false
			}
			i += j + 1
		case '<':
			if bytes.HasPrefix(data[i:], []byte("<!--")) {
				j := bytes.Index(data[i+4:], []byte("-->"))
				if j < 0 {
					return 0, false
				}
				i += 4 + j + 2
				continue
			}
			depth++
		case '>':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// tagName is the name of the tag in data[start:end] (< or </ included).
func tagName(data []byte, start, end int, endTag bool) []byte {
	from := start + 1
	if endTag {
		from++
	}
	i := from
	for i < end && !isSpace(data[i]) && data[i] != '/' && data[i] != '>' {
		i++
	}
	return data[from:i]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// local is a qualified name's part after its prefix.
func local(name []byte) []byte {
	if i := bytes.LastIndexByte(name, ':'); i >= 0 {
		return name[i+1:]
	}
	return name
}

// construct takes the construct c that ended at end into the unit: it
// returns the unit's end when the unit is complete, else -1.
func (s *xmlSplit) construct(c construct, data []byte, end int) int {
	switch {
	case !s.inRecord && c == cTag:
		name := tagName(data, s.cstart, end, false)
		empty := end >= 2 && data[end-2] == '/'
		if !bytes.Equal(local(name), s.rec) {
			s.name, s.empty = name, empty
			return s.finish(end, uOpen)
		}
		if empty {
			return s.finish(end, uRecord)
		}
		s.inRecord = true
		// The record's own name always: its end tag ends it.
		s.stack, s.named, s.deep = append(s.stack[:0], bytes.Clone(name)), len(name), 0
		return -1
	case !s.inRecord && c == cEndTag:
		s.name = tagName(data, s.cstart, end, true)
		return s.finish(end, uClose)
	case !s.inRecord:
		s.pi = c == cPI
		return s.finish(end, uMarkup)
	case c == cTag:
		if end < 2 || data[end-2] != '/' {
			s.push(tagName(data, s.cstart, end, false))
		}
	case c == cEndTag && s.deep > 0:
		s.deep--
	case c == cEndTag:
		name := tagName(data, s.cstart, end, true)
		for i := len(s.stack) - 1; i >= 0; i-- {
			if bytes.Equal(s.stack[i], name) {
				// The record's own end tag ends it, whatever is still
				// open inside: encoding/xml names the mismatch.
				for _, n := range s.stack[i:] {
					s.named -= len(n)
				}
				if s.stack = s.stack[:i]; i == 0 {
					return s.finish(end, uRecord)
				}
				return -1
			}
		}
		for _, o := range s.outer {
			if bytes.Equal(o, name) {
				// An element around the record closes: the record's end
				// tag is missing, and the record ends before this one.
				s.byParent = o
				return s.finish(s.cstart, uRecord)
			}
		}
	}
	return -1
}

// stepper returns the character length function of a multi-byte
// encoding: how many bytes the character at b[0] has, 0 when b ends
// before it does. The lengths are those of valid text; on invalid bytes
// they may be wrong, and the record's decoding fails it anyway.
func stepper(name string) func([]byte) int {
	two := func(b []byte) int {
		if len(b) < 2 {
			return 0
		}
		return 2
	}
	switch name {
	case "shift_jis":
		return func(b []byte) int {
			if c := b[0]; c >= 0x81 && c <= 0x9F || c >= 0xE0 && c <= 0xFC {
				return two(b)
			}
			return 1
		}
	case "euc-jp":
		return func(b []byte) int {
			switch c := b[0]; {
			case c == 0x8F:
				if len(b) < 3 {
					return 0
				}
				return 3
			case c == 0x8E || c >= 0xA1 && c <= 0xFE:
				return two(b)
			}
			return 1
		}
	case "euc-kr", "big5":
		return func(b []byte) int {
			if c := b[0]; c >= 0x81 && c <= 0xFE {
				return two(b)
			}
			return 1
		}
	case "gbk", "gb18030":
		return func(b []byte) int {
			if c := b[0]; c < 0x81 || c > 0xFE {
				return 1
			}
			if len(b) < 2 {
				return 0
			}
			if b[1] >= 0x30 && b[1] <= 0x39 {
				if len(b) < 4 {
					return 0
				}
				return 4
			}
			return 2
		}
	}
	return nil
}
