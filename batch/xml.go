package batch

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spoolq/spool"
)

// xmlReader reads the records of an XML file: xmlSplit finds them, and
// each is decoded and converted to JSON alone.
type xmlReader struct {
	r        *Reader
	split    xmlSplit
	elements int64  // the records found so far
	root     bool   // the root element has opened
	closed   bool   // the root element has closed
	named    int    // the bytes of split.outer's names, within maxNames
	other    []byte // the first element inside the root that is no record (note)
	ns       xmlScope
}

// note says, once the file is read, that it held elements inside its
// root but none of the queue's records, or "": a record name that is not
// the files' (a typo, another case, another system's file) would
// otherwise pass every file to done/ with no record and no word.
func (x *xmlReader) note() string {
	if x.elements > 0 || x.other == nil {
		return ""
	}
	other, bad := x.r.dec.decode(x.other)
	if bad != nil {
		return fmt.Sprintf("no <%s> element, the queue's record, in the file", x.r.f.Record)
	}
	hint := "is the queue's record name right, and the file this queue's?"
	if bytes.EqualFold(local(other), []byte(x.r.f.Record)) {
		hint = "record names are case-sensitive"
	}
	return fmt.Sprintf("no <%s> element, the queue's record, in the file, which holds <%s>: %s", x.r.f.Record, other, hint)
}

func newXMLReader(r *Reader) *xmlReader {
	name, _ := r.cs.encode(r.f.Record) // Check made sure it encodes
	return &xmlReader{r: r, split: xmlSplit{rec: name, step: stepper(r.cs.name)}}
}

// next reads on to the next record, checking the markup on the way.
func (x *xmlReader) next() (Record, bool, error) {
	r, s := x.r, &x.split
	for {
		line := r.line
		u, ok, err := r.readUnit(s)
		if err != nil {
			return Record{}, false, err
		}
		bad := func(format string, args ...any) (Record, bool, error) {
			rec, err := r.tail(u, line, x.elements+1, fmt.Sprintf(format, args...))
			return rec, err == nil, err
		}
		if !ok {
			if r.src.broken != nil {
				return Record{}, false, nil // the reader's own failure
			}
			if n := len(s.outer); n > 0 {
				u = unit{start: r.src.offset()}
				return bad("the file ends before the end tag of <%s>", s.outer[n-1])
			}
			if !x.root {
				// Empty, or white space, comments and processing
				// instructions alone: an XML document has one root
				// element, so this is an export that failed, not one
				// of no records.
				u = unit{start: r.src.offset()}
				return bad("no root element: the file is not an XML document")
			}
			return Record{}, false, nil
		}
		r.line += u.lines
		if u.stuck {
			return bad("markup longer than %d bytes", len(r.src.buf))
		}
		switch s.kind {
		case uText:
			if len(s.outer) == 0 && !blank(u.raw) {
				return bad("text outside the root element")
			}
		case uMarkup:
			if s.pi && u.start == int64(r.bom) && isXMLDecl(u.raw) {
				if msg := x.declaration(u.raw); msg != "" {
					return bad("%s", msg)
				}
			}
		case uOpen:
			if x.closed {
				return bad("a second root element <%s>: files joined into one? (an XML document has one root; the rest of the file is this dead letter, which replays as a document of its own)", s.name)
			}
			if x.root && x.other == nil {
				x.other = bytes.Clone(s.name)
			}
			x.root = true
			if !s.empty {
				switch {
				case len(s.outer) >= spool.MaxDepth:
					return bad("elements nested deeper than %d around the records", spool.MaxDepth)
				case x.named+len(s.name) > maxNames:
					return bad("the names of the elements open around the records are longer than %d bytes in all", maxNames)
				}
				s.outer = append(s.outer, bytes.Clone(s.name))
				x.ns.open(u.raw)
				x.named += len(s.name)
			} else if len(s.outer) == 0 {
				x.closed = true
			}
		case uClose:
			n := len(s.outer)
			if n == 0 {
				return bad("end tag </%s> with no element open", s.name)
			}
			if !bytes.Equal(s.outer[n-1], s.name) {
				return bad("end tag </%s> where </%s> belongs", s.name, s.outer[n-1])
			}
			x.named -= len(s.outer[n-1])
			s.outer = s.outer[:n-1]
			x.ns.close()
			x.closed = n == 1
		case uBad:
			return bad("%s", s.bad)
		case uRecord:
			if x.closed {
				return bad("a second root element <%s>: records without an element around them, or files joined into one? (an XML document has one root)", r.f.Record)
			}
			x.root = true
			x.closed = len(s.outer) == 0
			x.elements++
			return x.record(u, line)
		}
	}
}

// isXMLDecl reports whether a processing instruction is the XML
// declaration.
func isXMLDecl(pi []byte) bool {
	return len(pi) > 6 && bytes.HasPrefix(pi, []byte("<?xml")) && isSpace(pi[5])
}

// declaration checks the XML declaration: an encoding it names must be
// the queue's (a file that says it is ISO-8859-2 read as windows-1252
// would decode to the wrong letters without an error). It keeps the
// declaration to start each one-record dead letter with.
func (x *xmlReader) declaration(pi []byte) string {
	r := x.r
	r.prefix = slices.Concat(bomUTF8[:r.bom], pi, newline)
	label, ok := pseudoAttr(pi, "encoding")
	if !ok {
		return ""
	}
	cs, err := lookupCharset(string(label))
	switch {
	case err != nil:
		return fmt.Sprintf("the XML declaration names the encoding %q, and the queue reads %s", label, r.cs.name)
	case cs.utf16 != nil && r.cs.utf16 != nil:
		// "UTF-16" names either byte order: the file's mark says which.
	case cs.name != r.cs.name && r.bom > 0:
		// The mark made the file UTF-8 whatever the queue's encoding.
		return fmt.Sprintf("the file starts with UTF-8's byte order mark, and its XML declaration names the encoding %q (%s): remove the one that is wrong", label, cs.name)
	case cs.name != r.cs.name:
		return fmt.Sprintf("the XML declaration names the encoding %q (%s), and the queue reads %s: set the queue's encoding, or convert the file", label, cs.name, r.cs.name)
	}
	return ""
}

// pseudoAttr finds name="value" (or 'value') in the XML declaration.
func pseudoAttr(pi []byte, name string) ([]byte, bool) {
	i := bytes.Index(pi, []byte(name))
	if i < 0 || i == 0 || !isSpace(pi[i-1]) {
		return nil, false
	}
	rest := bytes.TrimLeft(pi[i+len(name):], " \t\r\n")
	if len(rest) == 0 || rest[0] != '=' {
		return nil, false
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) == 0 || rest[0] != '"' && rest[0] != '\'' {
		return nil, false
	}
	end := bytes.IndexByte(rest[1:], rest[0])
	if end < 0 {
		return nil, false
	}
	return rest[1 : 1+end], true
}

// record makes the Record of the record unit u, found on line.
func (x *xmlReader) record(u unit, line int64) (Record, bool, error) {
	r, s := x.r, &x.split
	rec := r.record(u, line)
	rec.Element = x.elements
	rec.scope = x.ns.current()
	switch {
	case s.byEnd && r.src.broken != nil:
		rec, err := r.tail(u, line, x.elements, r.src.brokenDetail())
		return rec, err == nil, err
	case s.byEnd:
		rec, err := r.tail(u, line, x.elements, fmt.Sprintf("the file ends inside the record <%s>", r.f.Record))
		return rec, err == nil, err
	case u.raw == nil:
		r.tooLarge(&rec)
		return rec, true, nil
	case r.light:
		return rec, true, nil
	}
	rec.Raw = bytes.Clone(u.raw)
	text, bad := r.dec.decode(u.raw)
	if bad != nil {
		r.fail(&rec, "%s", bad.describe(r.cs))
		return rec, true, nil
	}
	if s.byParent != nil {
		r.fail(&rec, "the record has no end tag: </%s> closes the element around it first", s.byParent)
		return rec, true, nil
	}
	obj, msg := convertXML(text, line, xmlConv{numbers: r.f.numbers, read: r.f.read, xsi: x.ns.xsiPrefixes()})
	if msg != "" {
		r.fail(&rec, "%s", msg)
		return rec, true, nil
	}
	rec.JSON = obj
	return rec, true, nil
}

// xnode is an element of a record, as convertXML builds it.
type xnode struct {
	name  string
	attrs []xml.Attr
	kids  []*xnode
	text  []byte
	mixed bool // it has text besides white space
}

// convertXML parses one record element, in UTF-8, with encoding/xml
// (strictly: undefined entities, mismatched tags, bad attributes fail)
// and converts it to a JSON object: see docs/DESIGN.md, "Batch files". It
// returns what is wrong instead, naming the file's line (the record
// starts on line).
func convertXML(text []byte, line int64, c xmlConv) ([]byte, string) {
	dec := xml.NewDecoder(bytes.NewReader(text))
	var root *xnode
	var stack []*xnode
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		var syn *xml.SyntaxError
		switch {
		case errors.As(err, &syn) && strings.HasPrefix(syn.Msg, "invalid character entity &"):
			// Its DOCTYPE may declare it: such entities are not expanded,
			// nor external ones fetched (no billion laughs, no XXE).
			return nil, fmt.Sprintf("XML syntax error on line %d: %s (only XML's five and character references are expanded, not those a DOCTYPE declares)", line+int64(syn.Line)-1, syn.Msg)
		case errors.As(err, &syn):
			return nil, fmt.Sprintf("XML syntax error on line %d: %s", line+int64(syn.Line)-1, syn.Msg)
		case err != nil:
			return nil, fmt.Sprintf("XML error: %v", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if len(stack) >= spool.MaxDepth {
				return nil, fmt.Sprintf("elements nested deeper than %d", spool.MaxDepth)
			}
			n := &xnode{name: t.Name.Local, attrs: t.Attr}
			if len(stack) > 0 {
				top := stack[len(stack)-1]
				top.kids = append(top.kids, n)
			} else {
				root = n
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				top := stack[len(stack)-1]
				top.text = append(top.text, t...)
				top.mixed = top.mixed || !blank(t)
			}
		}
	}
	if root == nil {
		return nil, "no element" // the lexer gives a record only from a start tag: not reached
	}
	out := c.element(nil, root, true)
	if c.err != "" {
		return nil, c.err
	}
	return out, ""
}

// xmlConv converts xnodes to JSON, keeping the first conflict it meets.
type xmlConv struct {
	err string
	// numbers are the record's fields whose text is read without the
	// XML white space around it (Format.numbers).
	numbers map[string]bool
	// read are the record's fields the contract reads (Format.read),
	// which xsi:nil makes null.
	read map[string]bool
	// xsi are the prefixes the elements around the record bind to the
	// XML Schema instance namespace (xsiNS), for its nil attribute; one
	// the record declares itself the decoder resolves.
	xsi map[string]bool
}

// xsiNS is the XML Schema instance namespace, whose nil attribute says an
// element has no value: .NET's XmlSerializer and SQL Server's FOR XML
// ELEMENTS XSINIL write <amount xsi:nil="true"/> for a null.
const xsiNS = "http://www.w3.org/2001/XMLSchema-instance"

// isNil reports whether n is an empty element that its xsi:nil attribute
// says is null.
func (c *xmlConv) isNil(n *xnode) bool {
	if len(n.kids) > 0 || n.mixed {
		return false
	}
	for _, a := range n.attrs {
		if a.Name.Local == "nil" && (a.Name.Space == xsiNS || c.xsi[a.Name.Space]) {
			v := strings.TrimSpace(a.Value)
			return v == "true" || v == "1"
		}
	}
	return false
}

// element appends n's JSON: a string for an element with only text, an
// object for the record and for an element with attributes or children:
// its attributes (namespace declarations left out), then its children,
// those sharing a name together as an array at the place of the first,
// then "#text" for text beside them that is not only white space. Names
// are local names, so an attribute and a child, or two attributes of two
// namespaces, with one local name cannot both be fields: that fails the
// record.
func (c *xmlConv) element(out []byte, n *xnode, record bool) []byte {
	if !record && len(n.attrs) == 0 && len(n.kids) == 0 {
		return appendString(out, n.text)
	}
	first := true
	member := func(name string) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(appendString(out, []byte(name)), ':')
	}
	out = append(out, '{')
	attrs := make(map[string]bool, len(n.attrs))
	for _, a := range n.attrs {
		if a.Name.Space == "xmlns" || a.Name.Space == "" && a.Name.Local == "xmlns" {
			continue
		}
		if attrs[a.Name.Local] {
			c.fail("element <%s> has two attributes %q", n.name, a.Name.Local)
			return out
		}
		attrs[a.Name.Local] = true
		member(a.Name.Local)
		v := []byte(a.Value)
		if record && c.numbers[a.Name.Local] {
			v = bytes.Trim(v, " \t\r\n") // as a child's text (child)
		}
		out = appendString(out, v)
	}
	var order []string
	groups := map[string][]*xnode{}
	for _, k := range n.kids {
		if _, ok := groups[k.name]; !ok {
			if attrs[k.name] {
				c.fail("element <%s> has an attribute and a child element both named %q", n.name, k.name)
				return out
			}
			order = append(order, k.name)
		}
		groups[k.name] = append(groups[k.name], k)
	}
	for _, name := range order {
		member(name)
		g := groups[name]
		numeric, read := record && c.numbers[name], record && c.read[name]
		if len(g) == 1 {
			out = c.child(out, g[0], numeric, read)
			continue
		}
		out = append(out, '[')
		for i, k := range g {
			if i > 0 {
				out = append(out, ',')
			}
			out = c.child(out, k, numeric, read)
		}
		out = append(out, ']')
	}
	if n.mixed {
		member("#text")
		out = appendString(out, n.text)
	}
	return append(out, '}')
}

// child appends the JSON of n, a child element: null when it is a field
// the contract reads (read) and its xsi:nil says so; numeric, the text of one that holds text alone is taken
// without the XML white space around it, as XML Schema reads its numeric
// types (<seq>\n  6\n</seq> is 6).
func (c *xmlConv) child(out []byte, n *xnode, numeric, read bool) []byte {
	if read && c.isNil(n) {
		return append(out, "null"...)
	}
	if numeric && len(n.attrs) == 0 && len(n.kids) == 0 {
		return appendString(out, bytes.Trim(n.text, " \t\r\n"))
	}
	return c.element(out, n, false)
}

func (c *xmlConv) fail(format string, args ...any) {
	if c.err == "" {
		c.err = fmt.Sprintf(format, args...)
	}
}
