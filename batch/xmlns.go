package batch

import "bytes"

// A record of an XML file may use namespace prefixes that an element
// around it declares (<n:Orders xmlns:n="urn:x"><n:Order>...), and a
// default namespace likewise. Its dead letter holds the record alone, so
// it carries those declarations on its own start tag: without them it
// would not be namespace-well-formed, and an XML editor or xmllint, the
// operator's tools for fixing it, would refuse it ("namespace prefix n
// is not defined"). spool's reader reads records by local name, so the
// record's object is the same either way.

// xmlnsDecl is one namespace declaration of a start tag: its attribute's
// name (xmlns, xmlns:n) and the attribute as written (xmlns:n="urn:x"),
// in the file's encoding.
type xmlnsDecl struct {
	name, text []byte
}

// maxScope bounds the bytes of the declarations held for the elements
// open around the records; past it, further ones are not carried into
// dead letters (which spool still reads back alike).
const maxScope = 64 << 10

// xmlScope keeps the declarations of the elements open around the
// records, one level a start tag, and the scope they make together.
type xmlScope struct {
	levels [][]xmlnsDecl
	held   int             // the bytes of levels' declarations
	scope  []xmlnsDecl     // what is in scope, innermost first; shared by the records, never changed in place
	xsi    map[string]bool // the prefixes scope binds to xsiNS; shared likewise
	stale  bool            // levels changed since scope was made
}

// open takes the start tag of an element around the records, a
// non-empty one (an empty one closes at once and scopes nothing).
func (x *xmlScope) open(tag []byte) {
	decls := xmlnsDecls(tag)
	n := 0
	for _, d := range decls {
		n += len(d.text)
	}
	if x.held+n > maxScope {
		decls, n = nil, 0
	}
	for i := range decls {
		decls[i].name, decls[i].text = bytes.Clone(decls[i].name), bytes.Clone(decls[i].text)
	}
	x.levels = append(x.levels, decls)
	x.held += n
	x.stale = x.stale || len(decls) > 0
}

// close takes the end tag of the innermost element around the records.
func (x *xmlScope) close() {
	last := x.levels[len(x.levels)-1]
	for _, d := range last {
		x.held -= len(d.text)
	}
	x.levels = x.levels[:len(x.levels)-1]
	x.stale = x.stale || len(last) > 0
}

// current is the scope of a record starting now: each name's innermost
// declaration.
func (x *xmlScope) current() []xmlnsDecl {
	if !x.stale {
		return x.scope
	}
	x.stale = false
	var scope []xmlnsDecl
	var xsi map[string]bool
	for i := len(x.levels) - 1; i >= 0; i-- {
		for _, d := range x.levels[i] {
			if declares(scope, d.name) {
				continue
			}
			scope = append(scope, d)
			if prefix, ok := bytes.CutPrefix(d.name, []byte("xmlns:")); ok && declValue(d.text) == xsiNS {
				if xsi == nil {
					xsi = map[string]bool{}
				}
				xsi[string(prefix)] = true
			}
		}
	}
	x.scope, x.xsi = scope, xsi
	return scope
}

// xsiPrefixes are the prefixes that the elements open around a record
// starting now bind to the XML Schema instance namespace.
func (x *xmlScope) xsiPrefixes() map[string]bool {
	x.current()
	return x.xsi
}

// declValue is the value of a declaration as xmlnsDecls found it
// (xmlns:n="urn:x"), as written: namespace names are URIs, which hold no
// character an entity must stand for.
func declValue(text []byte) string {
	i := bytes.IndexAny(text, `"'`)
	if i < 0 || len(text) < i+2 {
		return ""
	}
	return string(text[i+1 : len(text)-1])
}

func declares(decls []xmlnsDecl, name []byte) bool {
	for _, d := range decls {
		if bytes.Equal(d.name, name) {
			return true
		}
	}
	return false
}

// withScope returns raw, a record element starting with its start tag,
// with the declarations of scope that its start tag does not make itself
// added to that tag; raw itself when there are none.
func withScope(raw []byte, scope []xmlnsDecl) []byte {
	if len(scope) == 0 || len(raw) == 0 || raw[0] != '<' {
		return raw
	}
	own := xmlnsDecls(raw)
	at := tagNameEnd(raw)
	var add []byte
	for _, d := range scope {
		if !declares(own, d.name) {
			add = append(append(add, ' '), d.text...)
		}
	}
	if add == nil {
		return raw
	}
	out := make([]byte, 0, len(raw)+len(add))
	return append(append(append(out, raw[:at]...), add...), raw[at:]...)
}

// tagNameEnd is where the name of the start tag that tag begins with
// ends.
func tagNameEnd(tag []byte) int {
	i := 1
	for i < len(tag) && !isSpace(tag[i]) && tag[i] != '/' && tag[i] != '>' {
		i++
	}
	return i
}

// isDeclName reports whether an attribute's name declares a namespace:
// xmlns, or xmlns:PREFIX with one prefix (not "xmlns:", nor two colons,
// which are no declaration and would read as a field where it is put).
func isDeclName(name []byte) bool {
	if string(name) == "xmlns" {
		return true
	}
	prefix, ok := bytes.CutPrefix(name, []byte("xmlns:"))
	return ok && len(prefix) > 0 && bytes.IndexByte(prefix, ':') < 0
}

// xmlnsDecls finds the namespace declarations among the attributes of
// the start tag that tag begins with. It reads as far as the attributes
// are well-formed and stops there: an outer tag that is not is the
// lexer's to report, and a record's fails its decoding.
func xmlnsDecls(tag []byte) []xmlnsDecl {
	if len(tag) == 0 || tag[0] != '<' {
		return nil
	}
	var decls []xmlnsDecl
	i := tagNameEnd(tag)
	for {
		for i < len(tag) && isSpace(tag[i]) {
			i++
		}
		start := i
		for i < len(tag) && !isSpace(tag[i]) && tag[i] != '=' && tag[i] != '/' && tag[i] != '>' {
			i++
		}
		name := tag[start:i]
		if len(name) == 0 {
			return decls
		}
		for i < len(tag) && isSpace(tag[i]) {
			i++
		}
		if i == len(tag) || tag[i] != '=' {
			return decls
		}
		i++
		for i < len(tag) && isSpace(tag[i]) {
			i++
		}
		if i == len(tag) || tag[i] != '"' && tag[i] != '\'' {
			return decls
		}
		end := bytes.IndexByte(tag[i+1:], tag[i])
		if end < 0 {
			return decls
		}
		i += end + 2
		if isDeclName(name) {
			decls = append(decls, xmlnsDecl{name: name, text: tag[start:i]})
		}
	}
}
