package batch

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"golang.org/x/text/encoding/unicode"
)

// u16 writes s, UTF-8, in UTF-16 of order, with a byte order mark if bom.
func u16(s string, order byteOrder, bom bool) []byte {
	if bom {
		s = "\ufeff" + s
	}
	return appendUTF16(nil, []byte(s), order)
}

// TestUTF16Records: CSV (tab-delimited, CRLF, a byte order mark: what
// Windows tools write as "Unicode text"), JSON Lines and XML in UTF-16 of
// either order read as their UTF-8 twins, characters beyond the BMP kept;
// the mark decides the order whatever the label says; the offsets are
// the decoded stream's.
func TestUTF16Records(t *testing.T) {
	le, be := binary.LittleEndian, binary.BigEndian
	for _, c := range []struct {
		name  string
		text  string // UTF-8, as decoded
		data  []byte
		f     Format
		wants []want
	}{
		{"csv le bom", "\ufeffid\tname\r\n1\tJosé 한국 𝄞\r\n2\tb\r\n", nil, Format{Kind: CSV, Delimiter: "\t", Encoding: "utf-16le"},
			[]want{ok(2, `{"id":"1","name":"José 한국 𝄞"}`), ok(3, `{"id":"2","name":"b"}`)}},
		{"jsonl be, the label's order", "{\"a\":\"é\"}\n{\"a\":\"𝄞\"}\n", nil, Format{Kind: JSONL, Encoding: "utf-16be"},
			[]want{ok(1, `{"a":"é"}`), ok(2, `{"a":"𝄞"}`)}},
		{"jsonl be by its mark, labelled utf-16", "\ufeff{\"a\":1}\n", u16("{\"a\":1}\n", be, true), Format{Kind: JSONL, Encoding: "utf-16"},
			[]want{ok(1, `{"a":1}`)}},
		{"xml le", "\ufeff<?xml version=\"1.0\" encoding=\"UTF-16\"?>\n<Orders><Order id=\"1\"><name>山田</name></Order></Orders>\n", nil,
			Format{Kind: XML, Record: "Order", Encoding: "utf-16le"}, []want{{line: 2, element: 1, json: `{"id":"1","name":"山田"}`}}},
		{"utf-8 by its mark", "\ufeffid\n1\n", []byte("\ufeffid\n1\n"), Format{Kind: CSV, Encoding: "utf-16le"}, []want{ok(2, `{"id":"1"}`)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := c.data
			if data == nil {
				order := byteOrder(le)
				if c.f.Encoding == "utf-16be" {
					order = be
				}
				data = u16(c.text, order, false)
			}
			for _, src := range []io.Reader{bytes.NewReader(data), iotest.OneByteReader(bytes.NewReader(data))} {
				recs, err := readFrom(noSeek{src}, "f", c.f, Position{})
				if err != nil {
					t.Fatal(err)
				}
				checkRecords(t, []byte(c.text), recs, c.wants)
			}
		})
	}
}

// TestUTF16Invalid: an unpaired surrogate fails its record alone (reason
// parse) and its dead letter holds the file's own code units again, in
// the file's order and with its byte order mark; a lone last byte fails
// the last record; a UTF-16 file in a queue of another encoding is one
// failure that says which encoding to set.
func TestUTF16Invalid(t *testing.T) {
	le := binary.LittleEndian
	f := Format{Kind: CSV, Encoding: "utf-16le"}
	head := u16("id,v\n", le, true)
	row2 := u16("1,a\n", le, false)
	row3 := append(append(u16("2,", le, false), 0x00, 0xD8), u16("x\n", le, false)...) // D800 alone
	row4 := u16("3,c\n", le, false)
	data := slicesConcat(head, row2, row3, row4)
	r, err := Open(bytes.NewReader(data), "t.csv", f)
	if err != nil {
		t.Fatal(err)
	}
	recs := nextAll(t, r)
	checkRecords(t, nil, recs, []want{ok(2, `{"id":"1","v":"a"}`), bad(3, "invalid utf-16le: an unpaired surrogate"), ok(4, `{"id":"3","v":"c"}`)})
	if len(recs) != 3 {
		return
	}
	if dl := r.DeadLetter(recs[1]); !bytes.Equal(dl.Content, slicesConcat(head, row3)) || dl.Name != "t~L3.csv" {
		t.Errorf("dead letter %s: % x, want the header and the row as the file has them: % x", dl.Name, dl.Content, slicesConcat(head, row3))
	}

	odd := append(slicesConcat(head, row2), '3')
	r, err = Open(bytes.NewReader(odd), "o.csv", f)
	if err != nil {
		t.Fatal(err)
	}
	recs = nextAll(t, r)
	checkRecords(t, nil, recs, []want{ok(2, `{"id":"1","v":"a"}`), bad(3, "a last byte without its pair")})
	if len(recs) == 2 {
		// The byte cannot be restored: U+FFFD stands for it.
		if dl, want := r.DeadLetter(recs[1]), slicesConcat(head, u16("\ufffd", le, false)); !bytes.Equal(dl.Content, want) {
			t.Errorf("dead letter of the lone last byte: % x, want % x", dl.Content, want)
		}
	}

	recs = readAll(t, "w.csv", data, Format{Kind: CSV})
	checkRecords(t, nil, recs, []want{{line: 1, err: "set the encoding to utf-16le", tail: true}})

	// A file of the other byte order without a mark is one line: its
	// header holds U+0A00, the other order's line feed.
	other := u16("id,v\n1,a\n", binary.BigEndian, false)
	recs = readAll(t, "b.csv", other, f)
	checkRecords(t, nil, recs, []want{{line: 1, err: "a line feed in the other byte order", tail: true}})

	// The other formats fail such a record as well.
	lone := func(before, after string) []byte {
		return slicesConcat(u16(before, le, false), []byte{0x00, 0xD8}, u16(after, le, false))
	}
	recs = readAll(t, "l.jsonl", lone(`{"a":"x`, "\"}\n"), Format{Kind: JSONL, Encoding: "utf-16le"})
	checkRecords(t, nil, recs, []want{bad(1, "unpaired surrogate")})
	recs = readAll(t, "l.xml", lone(`<a><r b="x`, `"/></a>`), Format{Kind: XML, Record: "r", Encoding: "utf-16le"})
	checkRecords(t, nil, recs, []want{{line: 1, element: 1, err: "unpaired surrogate"}})
}

// TestUTF16Unmarked: a JSON Lines or XML file in UTF-16 without a byte
// order mark, in a queue of another encoding or of the other byte order,
// is one failure of the whole file that names the encoding to set; a
// file of the queue's own encoding that merely starts with white space
// reads as ever.
func TestUTF16Unmarked(t *testing.T) {
	le, be := binary.LittleEndian, binary.BigEndian
	jsonl, xml := "{\"a\":1}\n{\"a\":2}\n", "\n<as><a>1</a></as>\n"
	for _, c := range []struct {
		name string
		data []byte
		f    Format
		err  string
	}{
		{"jsonl le in utf-8", u16(jsonl, le, false), Format{Kind: JSONL}, "UTF-16LE without a byte order mark (a NUL byte after its first character), and the queue's encoding is utf-8: set the encoding to utf-16le"},
		{"jsonl be in utf-8", u16(jsonl, be, false), Format{Kind: JSONL}, "UTF-16BE without a byte order mark (a NUL byte before its first character), and the queue's encoding is utf-8: set the encoding to utf-16be"},
		{"xml le in windows-1252", u16(xml, le, false), Format{Kind: XML, Record: "a", Encoding: "windows-1252"}, "queue's encoding is windows-1252: set the encoding to utf-16le"},
		{"jsonl be in utf-16le", u16(jsonl, be, false), Format{Kind: JSONL, Encoding: "utf-16le"}, "UTF-16BE without a byte order mark (it starts with U+7B00, '{' in the other byte order), and the queue reads utf-16le: set the encoding to utf-16be"},
		{"xml le in utf-16be", u16(xml, le, false), Format{Kind: XML, Record: "a", Encoding: "utf-16be"}, "UTF-16LE without a byte order mark (it starts with U+0A00, '\\n' in the other byte order), and the queue reads utf-16be: set the encoding to utf-16le"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, name := range []string{"f", "f.gz"} {
				data := c.data
				if name == "f.gz" {
					data = gz(t, data)
				}
				recs := readAll(t, name, data, c.f)
				if len(recs) != 1 || !recs[0].Whole || recs[0].Err == nil || !strings.Contains(recs[0].Err.Detail, c.err) {
					t.Fatalf("%s: %s, want the whole file refused: %q", name, describeAll(recs), c.err)
				}
			}
		})
	}
	// The queue's own encoding, from white space on, reads as ever.
	checkRecords(t, nil, readAll(t, "w.jsonl", []byte(" \t\n"+jsonl), Format{Kind: JSONL}), []want{ok(2, `{"a":1}`), ok(3, `{"a":2}`)})
	checkRecords(t, nil, readAll(t, "w.jsonl", u16(jsonl, be, false), Format{Kind: JSONL, Encoding: "utf-16be"}), []want{ok(1, `{"a":1}`), ok(2, `{"a":2}`)})
	checkRecords(t, nil, readAll(t, "w.xml", u16(xml, le, false), Format{Kind: XML, Record: "a", Encoding: "utf-16le"}), []want{{line: 2, element: 1, json: `{"#text":"1"}`}})
}

// TestUTF16DeadLetterReplays: a dead letter written back in UTF-16,
// fixed, reads in the same queue as its record would have.
func TestUTF16DeadLetterReplays(t *testing.T) {
	be := binary.BigEndian
	f := Format{Kind: XML, Record: "r", Encoding: "utf-16be"}
	data := u16("<?xml version=\"1.0\" encoding=\"utf-16\"?>\n<a><r n=\"é\">1</r><r n=\"2\"><x></r></a>", be, true)
	r, err := Open(bytes.NewReader(data), "d.xml", f)
	if err != nil {
		t.Fatal(err)
	}
	var failed Record
	for _, rec := range nextAll(t, r) {
		if rec.Err != nil {
			failed = rec
		}
	}
	if failed.Err == nil {
		t.Fatal("the malformed record did not fail")
	}
	dl := r.DeadLetter(failed)
	if !bytes.HasPrefix(dl.Content, []byte{0xFE, 0xFF}) {
		t.Fatalf("dead letter % x: want UTF-16BE with its mark", dl.Content[:min(8, len(dl.Content))])
	}
	text, err := unicode.UTF16(unicode.BigEndian, unicode.ExpectBOM).NewDecoder().Bytes(dl.Content)
	if err != nil {
		t.Fatal(err)
	}
	fixed := u16(strings.Replace(string(text), "<x>", "<x/>", 1), be, true)
	recs := readAll(t, dl.Name, fixed, f)
	checkRecords(t, nil, recs, []want{{line: 2, element: 1, json: `{"n":"2","x":""}`}})
}

// TestUTF16Resume: a UTF-16 file, gzipped or not, resumes after any
// record by reading again from its start, since its offsets are the
// decoded stream's; and a record over the limit is copied back in
// UTF-16 for its dead letter.
func TestUTF16Resume(t *testing.T) {
	le := binary.LittleEndian
	f := Format{Kind: JSONL, Encoding: "utf-16le", MaxSize: 64}
	long := strings.Repeat("é", 40)
	text := "{\"a\":1}\n{\"a\":\"" + long + "\"}\n{\"a\":\"한\"}\n"
	plain := u16(text, le, true)
	for _, name := range []string{"r.jsonl", "r.jsonl.gz"} {
		data := plain
		if strings.HasSuffix(name, ".gz") {
			data = gz(t, plain)
		}
		all := readAll(t, name, data, f)
		checkRecords(t, nil, all, []want{ok(1, `{"a":1}`), bad(2, "over the limit"), ok(3, `{"a":"한"}`)})
		if len(all) != 3 {
			return
		}
		for i := range all {
			rest, err := readFrom(bytes.NewReader(data), name, f, all[i].After())
			if err != nil {
				t.Fatalf("%s: resume after record %d: %v", name, i, err)
			}
			if len(rest) != len(all)-i-1 || len(rest) > 0 && !bytes.Equal(rest[0].JSON, all[i+1].JSON) {
				t.Errorf("%s: resumed after record %d: %s", name, i, describeAll(rest))
			}
		}
		r, err := Open(bytes.NewReader(data), name, f)
		if err != nil {
			t.Fatal(err)
		}
		var big Record
		for i := 0; i < 2; i++ {
			if big, err = r.Next(); err != nil {
				t.Fatal(err)
			}
		}
		dl := r.DeadLetter(big)
		var b bytes.Buffer
		b.Write(dl.Prefix)
		if err := f.CopyRange(&b, bytes.NewReader(data), name, dl.Start, dl.End); err != nil {
			t.Fatal(err)
		}
		if want := u16("{\"a\":\""+long+"\"}\n", le, false); !bytes.Equal(b.Bytes(), want) {
			t.Errorf("%s: copied % x, want % x", name, b.Bytes(), want)
		}
	}
}

// nextAll reads r's records to its end, keeping r for their dead letters.
func nextAll(t *testing.T, r *Reader) []Record {
	t.Helper()
	var recs []Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
}

// slicesConcat joins byte slices into a new one.
func slicesConcat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// FuzzUTF16: decoding then encoding back gives the file's bytes (a lone
// last byte aside), read in any pieces; valid UTF-16 decodes as
// golang.org/x/text decodes it.
func FuzzUTF16(f *testing.F) {
	for _, s := range []string{"", "a", "a\x00", "\x00\xd8", "\x00\xd8\x00\xdc", "\x00\xdc\x00\xd8", "\x3d\xd8\x1e\xdd", "\xfe\xff\x00a", "\xef\xbb\xbfa"} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, big bool) {
		order, xorder := byteOrder(binary.LittleEndian), unicode.LittleEndian
		if big {
			order, xorder = binary.BigEndian, unicode.BigEndian
		}
		// With a mark of the order given, so that no mark in data's first
		// bytes switches it.
		in := append(u16("", order, true), data...)
		for _, src := range []io.Reader{bytes.NewReader(in), iotest.OneByteReader(bytes.NewReader(in))} {
			out, err := io.ReadAll(newUTF16Reader(src, order))
			if err != nil {
				t.Fatal(err)
			}
			back := appendUTF16(nil, out, order)
			even := in[:len(in)&^1]
			if !bytes.Equal(back[:min(len(back), len(even))], even) || len(back) != len(even)+2*(len(in)&1) {
				t.Fatalf("% x decoded to % x, encoded back to % x", in, out, back)
			}
			if len(in)%2 == 0 && utf8.Valid(out) {
				want, err := unicode.UTF16(xorder, unicode.IgnoreBOM).NewDecoder().Bytes(in)
				if err != nil || !bytes.Equal(out, want) {
					t.Fatalf("% x: decoded % x, x/text % x (%v)", in, out, want, err)
				}
			}
		}
	})
}

// stuck returns no byte and no error, forever.
type stuck struct{}

func (stuck) Read([]byte) (int, error) { return 0, nil }

// TestUTF16NoProgress: a reader that never returns anything is an
// error, not a loop.
func TestUTF16NoProgress(t *testing.T) {
	if _, err := io.ReadAll(newUTF16Reader(stuck{}, binary.LittleEndian)); err != io.ErrNoProgress {
		t.Fatalf("got %v, want io.ErrNoProgress", err)
	}
}
