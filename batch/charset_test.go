package batch

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/transform"
)

var update = flag.Bool("update", false, "rewrite testdata/enc/ from the texts of encodedFiles")

// encodedFiles are the files of testdata/enc/: each text, in UTF-8 here,
// is written in the file's encoding by x/text's encoder (go test -update
// writes them; TestTestdataEncoded checks that the committed bytes are
// still what the encoder writes). Their characters are chosen for their
// bytes: Shift_JIS and Big5 characters whose trail byte is \, ], | or [,
// UHC characters with an ASCII letter for trail byte, GB18030's four-byte
// forms and its own U+FFFD.
var encodedFiles = []struct {
	file string
	f    Format
	text string
}{
	{"orders.sjis.csv", Format{Kind: CSV, Encoding: "shift_jis"},
		"id,city,item,note\r\n1,東京都,ソフト,表示\r\n2,大阪府,ポテト,\"能力,\"\"引用\"\"\"\r\n3,ｶﾀｶﾅ,‐],\"複数\r\n行ー\"\r\n"},
	{"orders.sjis.psv", Format{Kind: CSV, Encoding: "shift_jis", Delimiter: "|"},
		"id|item\n1|ポテト\n2|\"ポ|ソ\"\n3|表ソ能\n"},
	{"orders.sjis.xml", Format{Kind: XML, Encoding: "shift_jis", Record: "Order"},
		"<?xml version=\"1.0\" encoding=\"Shift_JIS\"?>\n<注文一覧>\n<Order id=\"1\"><note><![CDATA[‐]></Order>]]></note></Order>\n<Order id=\"2\" 都市=\"東京都\"/>\n</注文一覧>\n"},
	{"orders.euckr.jsonl", Format{Kind: JSONL, Encoding: "euc-kr"},
		"{\"msg_id\":\"1\",\"city\":\"서울특별시\",\"item\":\"주문\"}\n{\"msg_id\":\"2\",\"city\":\"똠방각하\",\"note\":\"햏\"}\n"},
	{"orders.gb18030.xml", Format{Kind: XML, Encoding: "gb18030", Record: "Order"},
		"<?xml version=\"1.0\" encoding=\"GB18030\"?>\n<订单列表>\n  <Order id=\"1\"><city>北京市</city><item>订单</item></Order>\n  <Order id=\"2\"><city>𠀀€</city><note><![CDATA[特殊<>]]></note></Order>\n  <Order id=\"3\"><note>\uFFFD</note></Order>\n</订单列表>\n"},
	{"orders.big5.jsonl", Format{Kind: JSONL, Encoding: "big5"},
		"{\"msg_id\":\"1\",\"name\":\"許功蓋\"}\n"},
	{"orders.cp1252.csv", Format{Kind: CSV, Encoding: "windows-1252", Delimiter: ";"},
		"id;name;price\n1;Café Straße;€5\n2;\"naïve; façade\";£3\n"},
}

func TestTestdataEncoded(t *testing.T) {
	for _, ef := range encodedFiles {
		enc, err := htmlindex.Get(ef.f.Encoding)
		if err != nil {
			t.Fatal(err)
		}
		b, err := enc.NewEncoder().Bytes([]byte(ef.text))
		if err != nil {
			t.Fatalf("%s: %v", ef.file, err)
		}
		path := filepath.Join("testdata", "enc", ef.file)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got := testdata(t, filepath.Join("enc", ef.file)); !bytes.Equal(got, b) {
			t.Errorf("%s is not its text in %s: run go test -update", path, ef.f.Encoding)
		}
	}
}

// TestEncodingsRoundTrip reads each file of testdata/enc/ in its
// encoding and its text in UTF-8: the records must be the same, JSON for
// JSON, and each record's Raw the file's own bytes, which decode to the
// UTF-8 record's.
func TestEncodingsRoundTrip(t *testing.T) {
	for _, ef := range encodedFiles {
		t.Run(ef.file, func(t *testing.T) {
			data := testdata(t, filepath.Join("enc", ef.file))
			got := readAll(t, ef.file, data, ef.f)
			checkInvariants(t, data, got)
			plain := ef.f
			plain.Encoding = ""
			want := readAll(t, ef.file, []byte(stripDecl(ef.text)), plain)
			if len(got) != len(want) || len(got) == 0 {
				t.Fatalf("%d records, %d in UTF-8:\n%s", len(got), len(want), describeAll(got))
			}
			enc, _ := htmlindex.Get(ef.f.Encoding)
			for i := range got {
				if got[i].Err != nil || want[i].Err != nil {
					t.Fatalf("record %d: %v / %v", i, got[i].Err, want[i].Err)
				}
				if !bytes.Equal(got[i].JSON, want[i].JSON) {
					t.Errorf("record %d:\n got %s\nwant %s", i, got[i].JSON, want[i].JSON)
				}
				raw, _, err := transform.Bytes(enc.NewDecoder(), got[i].Raw)
				if err != nil || !bytes.Equal(raw, want[i].Raw) {
					t.Errorf("record %d: Raw decodes to %q, want %q", i, raw, want[i].Raw)
				}
			}
		})
	}
	// And a few by their values, so that the comparison above is not
	// between two equally wrong readings.
	for _, c := range []struct{ file, json string }{
		{"orders.sjis.csv", `{"id":"3","city":"ｶﾀｶﾅ","item":"‐]","note":"複数\n行ー"}`},
		{"orders.sjis.psv", `{"id":"2","item":"ポ|ソ"}`},
		{"orders.sjis.xml", `{"id":"1","note":"‐]></Order>"}`},
		{"orders.euckr.jsonl", `{"msg_id":"2","city":"똠방각하","note":"햏"}`},
		{"orders.gb18030.xml", `{"id":"2","city":"𠀀€","note":"特殊<>"}`},
		{"orders.gb18030.xml", `{"id":"3","note":"` + "\uFFFD" + `"}`},
		{"orders.cp1252.csv", `{"id":"2","name":"naïve; façade","price":"£3"}`},
	} {
		var ef = encodedFiles[0]
		for _, e := range encodedFiles {
			if e.file == c.file {
				ef = e
			}
		}
		found := false
		for _, rec := range readAll(t, c.file, testdata(t, filepath.Join("enc", c.file)), ef.f) {
			found = found || string(rec.JSON) == c.json
		}
		if !found {
			t.Errorf("%s has no record %s", c.file, c.json)
		}
	}
}

// stripDecl drops the XML declaration of a text read as UTF-8: it names
// the encoding the text is written in, and the reader refuses a file
// whose declaration names another than the queue's.
func stripDecl(text string) string {
	if strings.HasPrefix(text, "<?xml") {
		return text[strings.Index(text, "?>")+2:]
	}
	return text
}

// TestInvalidSequences: a byte sequence that is not a character of the
// encoding fails its record, naming the encoding and the bytes, and the
// records around it read.
func TestInvalidSequences(t *testing.T) {
	for _, c := range []struct {
		encoding string
		bad      string // raw bytes inside the second record's value
		detail   string
	}{
		{"utf-8", "\xff", "invalid utf-8 byte sequence 0xFF"},
		{"utf-8", "\xe6\x9d", "invalid utf-8 byte sequence 0xE6"},
		{"shift_jis", "\x82", "invalid shift_jis byte sequence 0x82"},
		{"shift_jis", "\x85\x40", "invalid shift_jis byte sequence 0x85 0x40"},
		{"euc-kr", "\xc9", "invalid euc-kr byte sequence 0xC9"},
		{"gb18030", "\xff", "invalid gb18030 byte sequence 0xFF"},
		{"gb18030", "\x84\x31\xa4\x36\x84\x31\xa4\x37", ""}, // U+FFFC and U+FFFD: valid
		{"iso-8859-3", "\xa5", "invalid iso-8859-3 byte sequence 0xA5"},
		{"big5", "\x80", "invalid big5 byte sequence 0x80"},
	} {
		for _, f := range []Format{{Kind: JSONL}, {Kind: CSV}, {Kind: XML, Record: "r"}} {
			f.Encoding = c.encoding
			var data string
			switch f.Kind {
			case JSONL:
				data = "{\"v\":\"a\"}\n{\"v\":\"" + c.bad + "\"}\n{\"v\":\"c\"}\n"
			case CSV:
				data = "v\na\n" + c.bad + "\nc\n"
			case XML:
				data = "<rs><r v=\"a\"/><r v=\"" + c.bad + "\"/><r v=\"c\"/></rs>"
			}
			recs := readAll(t, "f", []byte(data), f)
			if len(recs) != 3 || recs[0].Err != nil || recs[2].Err != nil {
				t.Errorf("%s %s: %s", c.encoding, f.Kind, describeAll(recs))
				continue
			}
			switch err := recs[1].Err; {
			case c.detail == "" && err != nil:
				t.Errorf("%s %s: %v", c.encoding, f.Kind, err)
			case c.detail != "" && (err == nil || !strings.Contains(err.Detail, c.detail)):
				t.Errorf("%s %s: %v, want %q", c.encoding, f.Kind, err, c.detail)
			}
		}
	}
}

// TestStructuralBytesNeverTrail proves, for every encoding spool
// accepts, what splitting in the file's bytes relies on (charset.go):
// every character the encoding can write is either one ASCII byte for an
// ASCII character, or bytes none of which is an ASCII byte the splitters
// look for (line breaks, quotes, <, >, -, ?, /, !, =, white space),
// starting with a byte of 0x80 or more; and an ASCII byte alone is itself
// in every encoding.
func TestStructuralBytesNeverTrail(t *testing.T) {
	structural := map[byte]bool{}
	for _, c := range []byte("\t\n\r !\"'-/<=>?") {
		structural[c] = true
	}
	accepted := 0
	for name := range canonicalNames() {
		cs, err := lookupCharset(name)
		if err != nil {
			continue // refused, with the reason TestCheck checks
		}
		accepted++
		var enc transform.Transformer = transform.Nop
		if cs.enc != nil {
			enc = cs.enc.NewEncoder()
		}
		top := rune(0xFFFF)
		if name == "gb18030" || name == "utf-8" {
			top = utf8.MaxRune
		}
		var dst [16]byte
		for r := rune(0); r <= top; r++ {
			if r >= 0xD800 && r <= 0xDFFF {
				continue
			}
			src := utf8.AppendRune(nil, r)
			enc.Reset()
			n, _, err := enc.Transform(dst[:], src, true)
			if err != nil {
				continue // a character the encoding has not
			}
			b := dst[:n]
			switch {
			case r < utf8.RuneSelf && (n != 1 || b[0] != byte(r)) && !(name == "x-user-defined"):
				t.Errorf("%s writes ASCII %q as % X", name, r, b)
			case r >= utf8.RuneSelf && b[0] < utf8.RuneSelf:
				t.Errorf("%s writes %U as % X, starting with an ASCII byte", name, r, b)
			}
			for _, c := range b[1:] {
				if structural[c] {
					t.Errorf("%s writes %U as % X: %q inside a character", name, r, b, c)
				}
			}
		}
		if cs.enc != nil {
			for c := byte(0); c < utf8.RuneSelf; c++ {
				d, _ := cs.enc.NewDecoder().Bytes([]byte{c})
				if string(d) != string(rune(c)) {
					t.Errorf("%s decodes % X as %q", name, c, d)
				}
			}
		}
	}
	if accepted < 30 {
		t.Errorf("only %d encodings accepted", accepted)
	}
}

// canonicalNames are the WHATWG encodings' names, as htmlindex knows them.
func canonicalNames() map[string]bool {
	names := map[string]bool{}
	for _, label := range []string{"utf-8", "ibm866", "iso-8859-2", "iso-8859-3", "iso-8859-4", "iso-8859-5", "iso-8859-6",
		"iso-8859-7", "iso-8859-8", "iso-8859-8-i", "iso-8859-10", "iso-8859-13", "iso-8859-14", "iso-8859-15",
		"iso-8859-16", "koi8-r", "koi8-u", "macintosh", "windows-874", "windows-1250", "windows-1251",
		"windows-1252", "windows-1253", "windows-1254", "windows-1255", "windows-1256", "windows-1257",
		"windows-1258", "x-mac-cyrillic", "gbk", "gb18030", "big5", "euc-jp", "iso-2022-jp", "shift_jis",
		"euc-kr", "replacement", "utf-16be", "utf-16le", "x-user-defined"} {
		if _, err := htmlindex.Get(label); err == nil {
			names[label] = true
		}
	}
	return names
}

func TestBOM(t *testing.T) {
	for _, c := range []struct {
		name, data string
		f          Format
		want       []want
	}{
		{"utf-8 bom skipped, csv", "\ufeffid,name\n1,a\n", Format{Kind: CSV}, []want{ok(2, `{"id":"1","name":"a"}`)}},
		{"utf-8 bom skipped, jsonl", "\ufeff{\"a\":1}\n", Format{Kind: JSONL}, []want{ok(1, `{"a":1}`)}},
		{"utf-8 bom skipped, xml", "\ufeff<?xml version=\"1.0\" encoding=\"utf-8\"?><r a=\"1\"/>", Format{Kind: XML, Record: "r"},
			[]want{{line: 1, element: 1, json: `{"a":"1"}`}}},
		{"utf-8 bom in windows-1252: utf-8, csv", "\ufeffid,name\n1,M\u00fcller\n", Format{Kind: CSV, Encoding: "windows-1252"},
			[]want{ok(2, "{\"id\":\"1\",\"name\":\"M\u00fcller\"}")}},
		{"utf-8 bom in shift_jis: utf-8, jsonl", "\ufeff{\"a\":\"\u6771\u4eac\"}\n", Format{Kind: JSONL, Encoding: "shift_jis"},
			[]want{ok(1, "{\"a\":\"\u6771\u4eac\"}")}},
		{"utf-8 bom in euc-kr: utf-8, xml", "\ufeff<?xml version=\"1.0\"?><rs><r a=\"\ub611\"/></rs>", Format{Kind: XML, Record: "r", Encoding: "euc-kr"},
			[]want{{line: 1, element: 1, json: "{\"a\":\"\ub611\"}"}}},
		{"utf-16 bom", "\xff\xfei\x00d\x00\n\x00", Format{Kind: CSV},
			[]want{{line: 1, err: "UTF-16 byte order mark", tail: true}}},
		{"json keeps its bytes", "\ufeff{}", Format{}, []want{ok(1, "\ufeff{}")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs := readAll(t, "f", []byte(c.data), c.f)
			checkRecords(t, []byte(c.data), recs, c.want)
		})
	}
}

// TestCodePages: the names Windows, Python and Java give the East Asian
// code pages, which WHATWG does not list, are the WHATWG encodings of the
// same code page, in any case; an unknown name is still refused.
func TestCodePages(t *testing.T) {
	for label, want := range map[string]string{
		"cp949": "euc-kr", "CP949": "euc-kr", " ms949 ": "euc-kr", "UHC": "euc-kr",
		"cp936": "gbk", "cp932": "shift_jis", "cp950": "big5", "cp65001": "utf-8",
		"windows-949": "euc-kr", "euc-kr": "euc-kr",
	} {
		cs, err := lookupCharset(label)
		if err != nil || cs.name != want {
			t.Errorf("%q: %v, %v; want %s", label, cs, err, want)
		}
	}
	if _, err := lookupCharset("cp999"); err == nil || !strings.Contains(err.Error(), `"cp999" is unknown`) {
		t.Errorf("cp999: %v", err)
	}
}
