package batch

import (
	"slices"
	"strings"
	"testing"
)

func TestCSVFile(t *testing.T) {
	data := testdata(t, "orders.csv")
	recs := readAll(t, "orders.csv", data, Format{Kind: CSV})
	row := func(line int64, id, order, amount, note string) want {
		return ok(line, `{"msg_id":"`+id+`","order_no":"`+order+`","amount":"`+amount+`","note":`+note+`}`)
	}
	checkRecords(t, data, recs, []want{
		row(2, "1", "A-1", "10.00", `"plain"`),
		row(3, "2", "A-1", "12.50", `"quoted, with comma"`),
		row(4, "3", "A-2", "7", `"two\nlines"`),
		row(6, "4", "A-2", "8", `"doubled \"quotes\""`),
		row(7, "5", "A-3", "9", `""`),
		row(8, "6", "A-3", "1.5", `""`),
		row(10, "7", "A-4", "2", `"three\n\nlines"`),
		row(13, "8", "A-4", "3", `"ünïcödé"`),
		row(14, "9", "A-5", "4", `"a \"quoted\" word, and a comma"`),
		row(15, "10", "A-5", "5", `"tab\there"`),
		row(16, "11", "A-6", "6", `"x"`),
		bad(17, "line 17: 5 fields, and the header has 4"),
		row(18, "13", "A-7", "8", `"y"`),
		row(19, "14", "A-7", "9", `"z"`),
		row(20, "15", "A-8", "10", `"last"`),
	})
	if len(recs) > 11 {
		if got := string(recs[11].Raw); got != "12,A-6,7,extra,column\n" {
			t.Errorf("the bad row's Raw is %q", got)
		}
	}
}

func TestCSV(t *testing.T) {
	csv := Format{Kind: CSV}
	for _, c := range []struct {
		name, data string
		f          Format
		want       []want
	}{
		{"empty file", "", csv, nil},
		{"header only", "a,b\n", csv, nil},
		{"header without line feed", "a,b", csv, nil},
		{"last row without line feed", "a,b\n1,2", csv, []want{ok(2, `{"a":"1","b":"2"}`)}},
		{"crlf", "a,b\r\n1,2\r\n3,\"x\r\ny\"\r\n", csv, []want{ok(2, `{"a":"1","b":"2"}`), ok(3, `{"a":"3","b":"x\ny"}`)}},
		{"a lone cr is data", "a,b\n1,x\ry\n", csv, []want{ok(2, `{"a":"1","b":"x\ry"}`)}},
		{"cr at the end of the file", "a,b\n1,2\r", csv, []want{ok(2, `{"a":"1","b":"2"}`)}},
		{"blank lines skipped, a space is a field", "a\n\n\r\n \n", csv, []want{ok(4, `{"a":" "}`)}},
		{"comment lines", "# leading comment, \"with quote\na,b\n#1,2\n3,4\n #5,6\n", Format{Kind: CSV, Comment: "#"},
			[]want{ok(4, `{"a":"3","b":"4"}`), ok(5, `{"a":" #5","b":"6"}`)}},
		{"comment inside quotes is data", "a,b\n1,\"x\n# not a comment\"\n", Format{Kind: CSV, Comment: "#"},
			[]want{ok(2, `{"a":"1","b":"x\n# not a comment"}`)}},
		{"semicolon", "a;b\n1,5;\"x;y\"\n", Format{Kind: CSV, Delimiter: ";"}, []want{ok(2, `{"a":"1,5","b":"x;y"}`)}},
		{"tab", "a\tb\n1\t\"2\t3\"\n", Format{Kind: CSV, Delimiter: "\t"}, []want{ok(2, `{"a":"1","b":"2\t3"}`)}},
		{"excel's sep line skipped", "sep=;\r\na;b\r\n1;2\r\n", Format{Kind: CSV, Delimiter: ";"}, []want{ok(3, `{"a":"1","b":"2"}`)}},
		{"excel's sep line of the default delimiter", "sep=,\na,b\n1,2\n", csv, []want{ok(3, `{"a":"1","b":"2"}`)}},
		{"excel's sep line of another delimiter", "sep=;\na;b\n1;2\n", csv,
			[]want{{line: 1, err: `the header (line 1): sep=;, Excel's line naming the file's delimiter, and the queue's delimiter is ",": set delimiter to ";"`, tail: true}}},
		{"a sep line after it is the header", "sep=,\nsep=;\n1\n", csv, []want{ok(3, `{"sep=;":"1"}`)}},
		{"multi-byte delimiter", "a→b\n1→\"→\"\n", Format{Kind: CSV, Delimiter: "→"}, []want{ok(2, `{"a":"1","b":"→"}`)}},
		{"control characters escaped", "a\n\"\x01\x1f\\\"\n", csv, []want{ok(2, `{"a":"\u0001\u001f\\"}`)}},
		{"too few fields", "a,b,c\n1,2\n3,4,5\n", csv, []want{bad(2, "line 2: 2 fields, and the header has 3"), ok(3, `{"a":"3","b":"4","c":"5"}`)}},
		{"bare quote fails its row only", "a,b\n1,5\" screen\n2,x\n", csv,
			[]want{bad(2, "field 2: a quote in a field without quotes"), ok(3, `{"a":"2","b":"x"}`)}},
		{"text after a closing quote", "a,b\n1,\"x\"y\n2,z\n", csv,
			[]want{bad(2, "field 2: text after the closing quote"), ok(3, `{"a":"2","b":"z"}`)}},
		{"quote never closed runs to the end", "a,b\n1,2\n3,\"x\n4,5\n", csv,
			[]want{ok(2, `{"a":"1","b":"2"}`), {line: 3, err: "line 3: a quoted field is not closed before the end of the file", tail: true}}},
		{"a spreadsheet's empty rows skipped", ";;\r\na;b;c\r\n1;2;3\r\n;;\r\n;\r\n;;;;\r\n\"\";;\r\n", Format{Kind: CSV, Delimiter: ";"},
			[]want{ok(3, `{"a":"1","b":"2","c":"3"}`), ok(7, `{"a":"","b":"","c":""}`)}},
		{"the header again (files joined)", "a,b\n1,2\na,b\n3,4\n\"a\",b\n", csv,
			[]want{ok(2, `{"a":"1","b":"2"}`), bad(3, "line 3: the header again, as a row: files joined into one?"), ok(4, `{"a":"3","b":"4"}`), bad(5, "line 5: the header again")}},
		{"the header again, with its byte order mark", "\ufeffa,b\r\n1,2\r\n\ufeffa,b\r\n\ufeff3,4\r\n", csv,
			[]want{ok(2, `{"a":"1","b":"2"}`), bad(3, "line 3: the header again"), ok(4, "{\"a\":\"\ufeff3\",\"b\":\"4\"}")}},
		{"the header again, escaped names", "\"a\"\"\",\"é\\\"\n\"a\"\"\",\"é\\\"\n", csv, []want{bad(2, "line 2: the header again")}},
		{"header names twice", "a,a\n1,2\n", csv, []want{{line: 1, err: `the header (line 1): the name "a" is given twice`, tail: true}}},
		{"header name empty", "a,,c\n1,2,3\n", csv, []want{{line: 1, err: "the header (line 1): field 2 has no name", tail: true}}},
		{"header ends with the delimiter", "a,b,\n1,2,\n", csv, []want{{line: 1, err: "the header (line 1): field 3 has no name: the header ends with the delimiter", tail: true}}},
		{"rows end with the delimiter", "a,b\n1,2,\n3,4,5\n", csv, []want{bad(2, "line 2: 3 fields, and the header has 2: the line ends with the delimiter"), bad(3, "line 3: 3 fields, and the header has 2")}},
		{"lines end with cr alone", "a,b\r1,2\r3,4\r", csv, []want{{line: 1, err: "the header (line 1): field 2 holds a carriage return: the file's lines end with CR alone", tail: true}}},
		{"utf-16 without a mark", "a\x00,\x00b\x00\n\x001\x00,\x002\x00\n\x00", csv, []want{{line: 1, err: "field 1 holds a NUL character: the file looks like UTF-16 without a byte order mark", tail: true}}},
		{"header with a bare quote", "a,b\"\n1,2\n", csv, []want{{line: 1, err: "the header (line 1): field 2: a quote", tail: true}}},
		{"header after comments", "#c\n\na,b\n1,2\n", Format{Kind: CSV, Comment: "#"}, []want{ok(4, `{"a":"1","b":"2"}`)}},
		{"too large row", "a\nshort\n" + strings.Repeat("x", 100) + "\nok\n", Format{Kind: CSV, MaxSize: 50},
			[]want{ok(2, `{"a":"short"}`), bad(3, "line 3: a record of 101 bytes, over the limit of 50 bytes"), ok(4, `{"a":"ok"}`)}},
		{"too large quoted row spanning lines", "a\n\"" + strings.Repeat("x\n", 60) + "\"\nok\n", Format{Kind: CSV, MaxSize: 50},
			[]want{bad(2, "a record of 123 bytes"), ok(63, `{"a":"ok"}`)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs := readAll(t, "f.csv", []byte(c.data), c.f)
			checkRecords(t, []byte(c.data), recs, c.want)
			// The same, read a byte at a time: the window's edges must
			// not matter.
			recs, err := readFrom(oneByte{strings.NewReader(c.data)}, "f.csv", c.f, Position{})
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, []byte(c.data), recs, c.want)
		})
	}
}

// TestCSVTrailingDelimiter: a row with one field more than the header,
// empty, is said to end with the delimiter (an exporter that ends every
// line so); one whose extra field holds something is not.
func TestCSVTrailingDelimiter(t *testing.T) {
	recs := readAll(t, "f.csv", []byte("a,b\n1,2,\n3,4,5\n"), Format{Kind: CSV})
	var got []string
	for _, rec := range recs {
		if rec.Err != nil {
			got = append(got, rec.Err.Detail)
		}
	}
	want := []string{"line 2: 3 fields, and the header has 2: the line ends with the delimiter", "line 3: 3 fields, and the header has 2"}
	if !slices.Equal(got, want) {
		t.Fatalf("failures %q, want %q", got, want)
	}
}

// TestCSVHugeFileHeaderPrefix: a dead letter of a CSV record starts with
// the header line as it is in the file, byte order mark included.
func TestCSVPrefix(t *testing.T) {
	data := "\ufeffid;name\r\n1;a;extra\r\n"
	r, err := Open(strings.NewReader(data), "x.csv", Format{Kind: CSV, Delimiter: ";"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Next()
	if err != nil || rec.Err == nil {
		t.Fatalf("%+v, %v", rec, err)
	}
	if got := string(r.DeadLetter(rec).Content); got != "\ufeffid;name\r\n1;a;extra\r\n" {
		t.Errorf("dead letter %q", got)
	}
}
