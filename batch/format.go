package batch

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spoolq/spool"
)

// The formats of a queue's files (Format.Kind).
const (
	// JSON is one message per file, as spool has always read it: the
	// file's bytes are the message, for Contract.Parse. The default.
	JSON = "json"
	// JSONL is one JSON object per line (JSON Lines); blank lines are
	// skipped.
	JSONL = "jsonl"
	// CSV is RFC 4180 as encoding/csv reads it, with a header row naming
	// the fields; every value is a string.
	CSV = "csv"
	// XML is a document whose elements named Format.Record are the
	// records; their attributes and child elements are the fields.
	XML = "xml"
)

// Kinds lists the formats in the order the errors name them.
var Kinds = []string{JSON, JSONL, CSV, XML}

// ErrBadFormat is wrapped by every error of Format.Check and Format.Set:
// the operator's configuration cannot work. It must stop a run, never
// dead-letter a file, since every file of the queue would meet it.
var ErrBadFormat = errors.New("bad format")

// Format says how a queue's files are read: which files are messages
// (Include, DoneFile), how each is decoded (Encoding, gzip by name) and
// how it splits into records (Kind, Delimiter, Comment, Record). The zero
// value is today's queue: one UTF-8 JSON message per *.json file.
//
// spool.conf sets it with the keys ConfigKeys lists, beside the
// contract's; Set reads one of them as strictly as the rest of the file.
type Format struct {
	// Kind is JSON, JSONL, CSV or XML; "" means JSON.
	Kind string
	// Encoding is a WHATWG encoding label ("utf-8", "windows-1252",
	// "shift_jis", "euc-kr", "gb18030"...); "" means UTF-8. The records
	// are decoded to UTF-8 as they are read; a byte sequence that is
	// invalid in it fails its record (reason parse). The WHATWG standard
	// maps the labels "iso-8859-1", "latin1" and "ascii" to windows-1252,
	// a superset, and so does spool. A UTF-16 file (utf-16le, utf-16be;
	// the label "utf-16" is utf-16le) is decoded as it is read, and its
	// byte order mark, if any, says which order it is in. ISO-2022-JP is
	// refused (see charset.go: records are split in the file's own
	// bytes). Windows' names of the East Asian code pages, which WHATWG
	// does not list (cp932, cp936, cp949, cp950), name the same encodings.
	Encoding string
	// Delimiter separates CSV fields: one character, "" meaning ",".
	// CSV only.
	Delimiter string
	// Comment starts a CSV comment line when it is the line's first
	// character: one character, "" meaning none. CSV only.
	Comment string
	// Record is the local name (without a namespace prefix) of the XML
	// elements that are the records. Required for XML, XML only.
	Record string
	// Include lists the path.Match patterns of the names that are
	// messages ("*.csv", "orders-*.csv.gz"). Empty means "*." plus the
	// kind ("*.json" for JSON). A name starting with "." never is: temp
	// files and copies in progress stay invisible, as with *.json today.
	// A name ending in ".gz" is read through gzip.
	Include []string
	// DoneFile is the name of the file that announces a data file as
	// complete, "{name}" standing for the data file's name
	// ("{name}.done", "{name}.ok", "done-{name}"). Empty means none: a
	// file is taken as soon as it is in inbox/. See Match.
	DoneFile string
	// HashKey makes a record's idempotency key the SHA-256 of its
	// canonical form (Key) instead of the contract's key field: for
	// files whose records carry no key. Two records with equal fields
	// are then one message, the second a duplicate.
	HashKey bool
	// MaxSize is the largest record, in bytes of the file's stream
	// (gunzipped, not yet decoded): the contract's limit
	// (spool.Contract.Limit), which phase 2 sets. A longer record fails
	// (reason too-large) without being held in memory. Zero means
	// spool.DefaultMaxSize. Not a key of spool.conf.
	MaxSize int64

	// columns are the fields a CSV header must name, each as a JSON
	// string (Files sets them from the contract): without a column for a
	// required field every row would fail, a dead letter each, so the
	// header fails the whole file instead.
	columns [][]byte
	// numbers are the contract's seq and amount fields (Files sets
	// them), whose text in an XML record is read without the white space
	// around it, as XML Schema reads its numeric types: a pretty-printer
	// writes <seq>\n  6\n</seq>. Every other field keeps its text as
	// written.
	numbers map[string]bool
	// read are the fields the contract reads (the key, order, seq and
	// amount fields, the header fields; Files sets them): one that an
	// XML record's xsi:nil says is null is null, the field absent. Other
	// fields keep the nil attribute as ever, so that no record the
	// contract took before reads otherwise, nor hashes to another key.
	read map[string]bool
}

// kind is f.Kind with its default.
func (f Format) kind() string {
	if f.Kind == "" {
		return JSON
	}
	return f.Kind
}

// limit is f.MaxSize with its default.
func (f Format) limit() int64 {
	if f.MaxSize == 0 {
		return spool.DefaultMaxSize
	}
	return f.MaxSize
}

// delimiter is f.Delimiter with its default, as a rune.
func (f Format) delimiter() rune {
	if f.Delimiter == "" {
		return ','
	}
	r, _ := utf8.DecodeRuneInString(f.Delimiter)
	return r
}

// comment is f.Comment as a rune, 0 for none.
func (f Format) comment() rune {
	if f.Comment == "" {
		return 0
	}
	r, _ := utf8.DecodeRuneInString(f.Comment)
	return r
}

// IncludesRule says which names of inbox/ are the format's data files, for
// an operator: its include patterns (or the default one), and its
// done-file pattern when it has one ("*.csv, *.csv.gz, once {name}.done
// is there").
func (f Format) IncludesRule() string {
	rule := strings.Join(f.includes(), ", ")
	if f.DoneFile != "" {
		rule += ", once " + f.DoneFile + " is there"
	}
	return rule
}

// includes is f.Include with its default.
func (f Format) includes() []string {
	if len(f.Include) == 0 {
		return []string{"*." + f.kind()}
	}
	return f.Include
}

// Same reports whether f and g read a queue's files alike, however each
// is written: defaults spelled out or left out ("" and "json", "," and
// no delimiter, no include and the kind's pattern), an encoding by any of
// its labels ("sjis" and "shift_jis"). Both are checked formats. MaxSize
// is the contract's, not compared.
func (f Format) Same(g Format) bool {
	fe, ferr := EncodingName(f.Encoding)
	ge, gerr := EncodingName(g.Encoding)
	return f.kind() == g.kind() && ferr == nil && gerr == nil && fe == ge &&
		f.delimiter() == g.delimiter() && f.comment() == g.comment() && f.Record == g.Record &&
		slices.Equal(f.includes(), g.includes()) && f.DoneFile == g.DoneFile && f.HashKey == g.HashKey
}

// Check reports a format that cannot work, as an error wrapping
// ErrBadFormat that names the key and what to write instead. Open checks
// it too; a program that reads spool.conf checks it at start, so that a
// mistake stops the run before any file is touched.
func (f Format) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadFormat, fmt.Sprintf(format, args...))
	}
	k := f.kind()
	if !slices.Contains(Kinds, k) {
		return bad("format %q is unknown: the formats are %s", f.Kind, strings.Join(Kinds, ", "))
	}
	cs, err := lookupCharset(f.Encoding)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadFormat, err)
	}
	if k != CSV {
		for _, o := range []struct{ key, val string }{{"delimiter", f.Delimiter}, {"comment", f.Comment}} {
			if o.val != "" {
				return bad("%s is for csv, and the format is %s: leave %s out", o.key, k, o.key)
			}
		}
	}
	if k == CSV {
		if err := checkCSVRune(cs, "delimiter", f.Delimiter); err != nil {
			return fmt.Errorf("%w: %w", ErrBadFormat, err)
		}
		if err := checkCSVRune(cs, "comment", f.Comment); err != nil {
			return fmt.Errorf("%w: %w", ErrBadFormat, err)
		}
		if f.Comment != "" && f.comment() == f.delimiter() {
			return bad("comment and delimiter are both %q", f.Comment)
		}
	}
	switch {
	case k == XML && f.Record == "":
		return bad(`the xml format needs "record", the name of the elements that are the records, such as "Order"`)
	case k != XML && f.Record != "":
		return bad("record is for xml, and the format is %s: leave record out", k)
	case k == XML:
		if err := checkXMLName(f.Record); err != nil {
			return fmt.Errorf("%w: %w", ErrBadFormat, err)
		}
		if _, err := cs.encode(f.Record); err != nil {
			return bad("record %q cannot be written in %s", f.Record, cs.name)
		}
	}
	if err := f.checkInclude(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadFormat, err)
	}
	if f.DoneFile != "" {
		if err := checkDoneFile(f.DoneFile); err != nil {
			return fmt.Errorf("%w: %w", ErrBadFormat, err)
		}
		if err := f.checkDoneShape(); err != nil {
			return fmt.Errorf("%w: %w", ErrBadFormat, err)
		}
	}
	if f.MaxSize < 0 {
		return bad("max size %d is negative", f.MaxSize)
	}
	return nil
}

// checkCSVRune checks a CSV delimiter or comment character: one character
// that encoding/csv accepts (not a quote, a line break, U+FFFD or NUL)
// and that the file's encoding can write.
func checkCSVRune(cs *charset, key, val string) error {
	if val == "" {
		return nil
	}
	r, size := utf8.DecodeRuneInString(val)
	switch {
	case size != len(val):
		return fmt.Errorf("%s %q is not one character: give one, such as \";\" or \"\\t\"", key, val)
	case r == utf8.RuneError:
		return fmt.Errorf("%s is not valid UTF-8", key)
	case r == '"', r == '\r', r == '\n', r == 0:
		return fmt.Errorf("%s %q cannot be a quote, a line break or NUL", key, val)
	}
	if _, err := cs.encode(val); err != nil {
		return fmt.Errorf("%s %q cannot be written in %s", key, val, cs.name)
	}
	return nil
}

// checkXMLName checks an XML record name: an XML name without a prefix
// (a colon), since records are matched by local name.
func checkXMLName(name string) error {
	if strings.Contains(name, ":") {
		return fmt.Errorf("record %q has a prefix: give the local name alone (%q), records are matched whatever their namespace", name, name[strings.LastIndexByte(name, ':')+1:])
	}
	for i, r := range name {
		ok := r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= 0xC0 && r != 0xD7 && r != 0xF7
		if i > 0 {
			ok = ok || r == '-' || r == '.' || r >= '0' && r <= '9' || r == 0xB7
		}
		if !ok || r == utf8.RuneError {
			return fmt.Errorf("record %q is not an XML element name", name)
		}
	}
	return nil
}

// checkInclude checks the include patterns. A pattern for gzipped files
// needs its uncompressed twin: a bad record of orders.csv.gz is written
// to error/ uncompressed (orders~L17.csv, DeadLetterName), and once an
// operator fixes and replays it, a queue that takes only *.csv.gz would
// leave it in inbox/ for ever.
func (f Format) checkInclude() error {
	if f.Include != nil && len(f.Include) == 0 {
		return errors.New("include is empty: no file would be a message; leave include out for the default")
	}
	for i, p := range f.Include {
		switch {
		case p == "":
			return fmt.Errorf("include[%d] is empty: give a pattern such as \"*.csv\"", i)
		case strings.ContainsAny(p, "/\x00"):
			return fmt.Errorf("include pattern %q has a slash: patterns match names in inbox/", p)
		case slices.Index(f.Include, p) != i:
			return fmt.Errorf("include lists %q twice", p)
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("include pattern %q: %w", p, err)
		}
		if plain, ok := strings.CutSuffix(p, ".gz"); ok && plain != "" && !slices.Contains(f.Include, plain) {
			return fmt.Errorf("include has %q but not %q: a bad record of a gzipped file goes to error/ uncompressed, and is taken again after a replay only if %q is included too", p, plain, plain)
		}
	}
	return nil
}

// checkDoneShape refuses a done-file pattern whose shape the data files
// have: a name of the done-file's shape is never data (Includes), so with
// "{name}.csv" beside "*.csv" every data file would pass for a done-file,
// and nothing would be consumed. A pattern is tried by a name it matches
// ("*" and "?" as "x"); one with a class or an escape is not tried.
func (f Format) checkDoneShape() error {
	for _, p := range f.includes() {
		if strings.ContainsAny(p, "[\\") {
			continue
		}
		example := strings.NewReplacer("*", "x", "?", "x").Replace(p)
		if f.isDoneName(example) {
			return fmt.Errorf("done_file %q has the shape of the data files include names (%q is of %q): every data file would pass for a done-file and none would be taken; give the done-files a suffix of their own, such as \"{name}.done\"", f.DoneFile, example, p)
		}
	}
	return nil
}

// checkDoneFile checks a done-file pattern: "{name}" once, with something
// beside it, no slash.
func checkDoneFile(p string) error {
	const name = "{name}"
	switch {
	case strings.Count(p, name) != 1:
		return fmt.Errorf("done_file %q must hold {name} once, such as \"{name}.done\"", p)
	case p == name:
		return fmt.Errorf("done_file %q would be the data file itself: add a suffix or prefix, such as \"{name}.done\"", p)
	case strings.ContainsAny(p, "/\x00"):
		return fmt.Errorf("done_file %q has a slash: done-files are in inbox/ beside their data files", p)
	case strings.HasPrefix(p, "."):
		return fmt.Errorf("done_file %q starts with a dot: such names are never messages nor done-files (they are temp files)", p)
	}
	return nil
}
