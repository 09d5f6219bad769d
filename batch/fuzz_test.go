package batch

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// The fuzz targets read any bytes as a file of their format and check
// what must hold whatever the bytes: no panic; records in order, their
// ranges following one another and their Raw the file's bytes; every byte
// of the file in a record or in what the format skips; and a reader
// resumed after any record reads exactly the records after it. FuzzCSV
// also compares the records with encoding/csv's where it reads the file
// without an error, FuzzJSONL with encoding/json's verdict on each line,
// FuzzXML with encoding/xml's on the whole document.

// fuzzSeeds adds the test files of testdata/ and inputs.
func fuzzSeeds(f *testing.F, ext string, inputs ...string) {
	for _, in := range inputs {
		f.Add([]byte(in), uint8(0))
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*"+ext))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, uint8(0))
		}
	}
}

// fuzzRead reads data as name in format fm, checks the invariants, and
// checks that resuming after each record (up to 64 of them) gives the
// rest, from a seekable reader and from a pipe.
func fuzzRead(t *testing.T, name string, data []byte, fm Format) []Record {
	recs, err := readFrom(bytes.NewReader(data), name, fm, Position{})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, data, recs)
	if n := len(recs); n > 0 && recs[n-1].End > int64(len(data)) {
		t.Fatalf("the last record ends at %d, after the file's %d bytes", recs[n-1].End, len(data))
	}
	step := max(1, len(recs)/64)
	for i := 0; i < len(recs); i += step {
		for _, src := range []io.Reader{bytes.NewReader(data), noSeek{bytes.NewReader(data)}} {
			rest, err := readFrom(src, name, fm, recs[i].After())
			if err != nil {
				t.Fatalf("resume after record %d (%T): %v", i, src, err)
			}
			if len(rest) != len(recs)-i-1 {
				t.Fatalf("resume after record %d (%T): %d records, want %d", i, src, len(rest), len(recs)-i-1)
			}
			for k := range rest {
				if !sameRecord(rest[k], recs[i+1+k]) {
					t.Fatalf("resume after record %d (%T): record %d:\n%s\nwant:\n%s", i, src, k, describeAll(rest[k:k+1]), describeAll(recs[i+1+k:i+2+k]))
				}
			}
		}
	}
	// A small limit takes the paths of records over it.
	small := fm
	small.MaxSize = 16
	recs16, err := readFrom(oneByte{bytes.NewReader(data)}, name, small, Position{})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, data, recs16)
	return recs
}

// gaps calls fn with every run of the file's bytes in no record.
func gaps(data []byte, recs []Record, fn func(start int64, gap []byte)) {
	var at int64
	for _, rec := range recs {
		if rec.Start > at {
			fn(at, data[at:rec.Start])
		}
		at = rec.End
	}
	if at < int64(len(data)) {
		fn(at, data[at:])
	}
}

func FuzzJSONL(f *testing.F) {
	fuzzSeeds(f, ".jsonl", "", "\n", "{}", "{\"a\":1}\n\n[1]\r\n{\"b\":\"\\u00e9\"}", "\ufeff{}\n{", "{\"a\":\"\xff\"}\n", " \t\r\n{} \n")
	f.Fuzz(func(t *testing.T, data []byte, _ uint8) {
		recs := fuzzRead(t, "f.jsonl", data, Format{Kind: JSONL})
		gaps(data, recs, func(start int64, gap []byte) {
			if start == 0 {
				gap = bytes.TrimPrefix(gap, bomUTF8)
			}
			if !blank(gap) {
				t.Fatalf("bytes %q at %d are in no record", gap, start)
			}
		})
		for _, rec := range recs {
			line := trimLineEnd(rec.Raw)
			if !utf8.Valid(line) || rec.Raw == nil {
				continue
			}
			line = bytes.TrimPrefix(line, bomUTF8) // a line's mark is read past
			object := json.Valid(line) && bytes.TrimLeft(line, " \t\r\n")[0] == '{'
			if object != (rec.Err == nil) {
				t.Fatalf("line %d %q: encoding/json says object %v, the reader %v", rec.Line, line, object, rec.Err)
			}
			// The canonical form of a key is JSON, and its own canonical
			// form.
			if c, err := canonicalJSON(rec.JSON); err == nil {
				if again, err := canonicalJSON(c); !json.Valid(c) || err != nil || !bytes.Equal(again, c) {
					t.Fatalf("line %d: canonical form %s, then %s, %v", rec.Line, c, again, err)
				}
			} else if rec.Err == nil && !strings.Contains(err.Error(), "repeats") {
				t.Fatalf("line %d: no canonical form: %v", rec.Line, err)
			}
		}
	})
}

func FuzzCSV(f *testing.F) {
	fuzzSeeds(f, ".csv", "", "a,b\n1,2\n", "sep=,\na,b\n1,2\n", "sep=;\r\na;b\r\n", "a;b\r\n\"x;\"\"y\"\"\";z\r\n", "#c\na\n\n1\n#d\n\"\n", "a\n\"b\rc\"\r\n", "a,b\n1,2\r", "a\n\"x\"y\n", "a\n5\" x\n")
	delims := []string{",", ";", "\t", "|", "→"}
	f.Fuzz(func(t *testing.T, data []byte, opt uint8) {
		fm := Format{Kind: CSV, Delimiter: delims[int(opt)%len(delims)]}
		if opt&0x80 != 0 {
			fm.Comment = "#"
		}
		recs := fuzzRead(t, "f.csv", data, fm)
		first := true
		gaps(data, recs, func(start int64, gap []byte) {
			if first && start == 0 {
				first = false
				return // the header, and what comes before it
			}
			for _, line := range bytes.SplitAfter(gap, newline) {
				if l := trimLineEnd(line); !onlyDelims(l, utf8.AppendRune(nil, fm.delimiter())) && (fm.Comment == "" || !bytes.HasPrefix(l, []byte(fm.Comment))) && !(len(l) == 1 && l[0] == '\r') {
					t.Fatalf("bytes %q at %d are in no record", gap, start)
				}
			}
		})
		compareCSV(t, data, fm, recs)
	})
}

// emptyRow reports whether row, read by encoding/csv at line of data,
// is a row of empty cells that the reader skips: its fields all empty,
// its line the delimiter alone, repeated.
func emptyRow(data []byte, line int, row []string, fm Format) bool {
	for _, v := range row {
		if v != "" {
			return false
		}
	}
	lines := bytes.Split(data, newline)
	return line-1 < len(lines) && onlyDelims(trimLineEnd(lines[line-1]), utf8.AppendRune(nil, fm.delimiter()))
}

// compareCSV checks the records against encoding/csv's reading of data,
// when encoding/csv reads it all without an error.
func compareCSV(t *testing.T, data []byte, fm Format, recs []Record) {
	if !utf8.Valid(data) || bytes.HasPrefix(data, bomUTF8) {
		return
	}
	cr := csv.NewReader(bytes.NewReader(data))
	cr.Comma = fm.delimiter()
	cr.Comment = fm.comment()
	cr.FieldsPerRecord = -1
	var rows [][]string
	var lines []int
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return
		}
		line, _ := cr.FieldPos(0)
		if emptyRow(data, line, row, fm) {
			continue // a spreadsheet's row of empty cells: skipped
		}
		rows, lines = append(rows, row), append(lines, line)
	}
	if len(rows) == 0 {
		if len(recs) != 0 {
			t.Fatalf("encoding/csv reads no row, the reader:\n%s", describeAll(recs))
		}
		return
	}
	// Excel's sep= line, where the header would be: skipped when it
	// names the queue's delimiter, else the whole file fails.
	if raw := bytes.Split(data, newline)[lines[0]-1]; len(rows) > 0 {
		if d, ok := excelSep(raw); ok {
			if d != fm.delimiter() {
				if len(recs) != 1 || !recs[0].Whole {
					t.Fatalf("sep=%c: the reader:\n%s", d, describeAll(recs))
				}
				return
			}
			if rows, lines = rows[1:], lines[1:]; len(rows) == 0 {
				if len(recs) != 0 {
					t.Fatalf("encoding/csv reads no row after sep=, the reader:\n%s", describeAll(recs))
				}
				return
			}
		}
	}
	header := rows[0]
	seen := map[string]bool{}
	for _, h := range header {
		if h == "" || seen[h] || strings.ContainsAny(h, "\r\x00\u0a00") { // oddName
			if len(recs) != 1 || !recs[0].Whole {
				t.Fatalf("header %q: the reader:\n%s", header, describeAll(recs))
			}
			return
		}
		seen[h] = true
	}
	if len(recs) != len(rows)-1 {
		t.Fatalf("encoding/csv reads %d rows, the reader:\n%s", len(rows)-1, describeAll(recs))
	}
	for i, rec := range recs {
		row := rows[i+1]
		if rec.Line != int64(lines[i+1]) {
			t.Fatalf("row %d at line %d, encoding/csv says %d", i, rec.Line, lines[i+1])
		}
		if len(row) != len(header) {
			if rec.Err == nil || !strings.Contains(rec.Err.Detail, "fields, and the header has") {
				t.Fatalf("row %d %q of %d fields: %s %v", i, row, len(row), rec.JSON, rec.Err)
			}
			continue
		}
		if len(row) == len(header) && slices.Equal(append([]string{strings.TrimPrefix(row[0], "\ufeff")}, row[1:]...), header) {
			if rec.Err == nil || !strings.Contains(rec.Err.Detail, "the header again") {
				t.Fatalf("row %d %q is the header: %s %v", i, row, rec.JSON, rec.Err)
			}
			continue
		}
		if rec.Err != nil {
			t.Fatalf("row %d %q: %v", i, row, rec.Err)
		}
		want := []byte{'{'}
		for k, h := range header {
			if k > 0 {
				want = append(want, ',')
			}
			want = append(appendString(want, []byte(h)), ':')
			want = appendString(want, []byte(row[k]))
		}
		if want = append(want, '}'); !bytes.Equal(rec.JSON, want) {
			t.Fatalf("row %d: %s, encoding/csv reads %s", i, rec.JSON, want)
		}
	}
}

func FuzzXML(f *testing.F) {
	fuzzSeeds(f, ".xml", "", "<r/>", "<rs><r a=\"1\"><b>x</b></r><r/></rs>", "<?xml version=\"1.0\"?><!DOCTYPE rs [<!ENTITY e \"v\">]><rs><!-- <r> --><r><![CDATA[</r>]]></r></rs>",
		"<rs><r><a></r><r/></rs>", "<rs><r><a>1</a></rs>", "<rs><x:r xmlns:x=\"u\" x:a=\"1\" a=\"2\"/></rs>", "<rs><r>&bad;</r>< r/>", "{}", "<n:rs xmlns:n=\"u\" xmlns=\"d\"><g xmlns:n=\"v\"><n:r n:k=\"1\"><n:a>1</n:a></n:r></g><r/></n:rs>")
	f.Fuzz(func(t *testing.T, data []byte, _ uint8) {
		fm := Format{Kind: XML, Record: "r"}
		recs := fuzzRead(t, "f.xml", data, fm)
		for _, rec := range recs {
			if !rec.Tail && len(rec.Raw) > 0 && rec.Raw[0] != '<' {
				t.Fatalf("element %d does not start with <: %q", rec.Element, rec.Raw)
			}
			if rec.Err == nil && !json.Valid(rec.JSON) {
				t.Fatalf("element %d: invalid JSON %s", rec.Element, rec.JSON)
			}
			if rec.Err == nil && !wellFormed(rec.Raw) {
				t.Fatalf("element %d reads, and encoding/xml refuses it: %q", rec.Element, rec.Raw)
			}
		}
		if !wellFormedDocument(data) {
			return
		}
		for _, rec := range recs {
			if rec.Err != nil && !strings.Contains(rec.Err.Detail, "both named") && !strings.Contains(rec.Err.Detail, "two attributes") {
				t.Fatalf("encoding/xml reads the document, and %s fails: %v", rec.Origin(), rec.Err)
			}
		}
		// A record's dead letter reads back as the record, and is
		// namespace-well-formed when the document is.
		r, err := Open(bytes.NewReader(data), "f.xml", fm)
		if err != nil {
			t.Fatal(err)
		}
		nsOK := nsWellFormed(data)
		for range recs {
			rec, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			d := r.DeadLetter(rec)
			if d.Content == nil {
				continue
			}
			if nsOK && !nsWellFormed(d.Content) {
				t.Fatalf("the dead letter of %s is not namespace-well-formed:\n%s", rec.Origin(), d.Content)
			}
			back := readAll(t, d.Name, d.Content, fm)
			if len(back) != 1 || !bytes.Equal(back[0].JSON, rec.JSON) || (back[0].Err == nil) != (rec.Err == nil) {
				t.Fatalf("the dead letter of %s reads back as\n%s\nwant\n%s", rec.Origin(), describeAll(back), describeAll([]Record{rec}))
			}
		}
	})
}

// wellFormed reports whether encoding/xml reads b to its end.
func wellFormed(b []byte) bool {
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// nsWellFormed reports whether b is XML that encoding/xml reads, whose
// every prefix of an element or attribute name is declared in scope.
func nsWellFormed(b []byte) bool {
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	var scopes []map[string]bool
	declared := func(prefix string) bool {
		if prefix == "" || prefix == "xml" || prefix == "xmlns" {
			return true
		}
		for _, sc := range slices.Backward(scopes) {
			if sc[prefix] {
				return true
			}
		}
		return false
	}
	for {
		tok, err := d.RawToken()
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return false
		}
		switch t := tok.(type) {
		case xml.StartElement:
			sc := map[string]bool{}
			for _, a := range t.Attr {
				if a.Name.Space == "xmlns" {
					sc[a.Name.Local] = true
				}
			}
			scopes = append(scopes, sc)
			if !declared(t.Name.Space) {
				return false
			}
			for _, a := range t.Attr {
				if !declared(a.Name.Space) {
					return false
				}
			}
		case xml.EndElement:
			if len(scopes) == 0 {
				return false
			}
			scopes = scopes[:len(scopes)-1]
		}
	}
}

// wellFormedDocument reports whether b is a document encoding/xml reads
// with one root and nothing but white space, comments and processing
// instructions around it, in UTF-8 and without a DOCTYPE (whose internal
// subset encoding/xml does not read).
func wellFormedDocument(b []byte) bool {
	if !utf8.Valid(b) || bytes.Contains(b, []byte("<!DOCTYPE")) {
		return false
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	depth, roots := 0, 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return roots == 1 && depth == 0
		}
		if err != nil {
			return false
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && !blank(t) {
				return false
			}
		case xml.Directive:
			return false
		}
	}
}
