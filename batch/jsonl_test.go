package batch

import (
	"strings"
	"testing"

	"github.com/spoolq/spool"
)

func TestJSONLFile(t *testing.T) {
	data := testdata(t, "orders.jsonl")
	recs := readAll(t, "orders.jsonl", data, Format{Kind: JSONL})
	checkRecords(t, data, recs, []want{
		ok(1, `{"msg_id":"1","order_no":"A-1","seq":1,"amount":"10.00"}`),
		ok(4, `{"msg_id":"2","order_no":"A-1","seq":2,"amount":12.5, "note": "spaced out" }`),
		bad(5, "line 5: not a JSON object, found an array"),
		ok(6, `{"msg_id":"4","order_no":"A-2","seq":1,"amount":"7","nested":{"a":[1,2,{"b":null}]}}`),
		bad(7, "line 7: want a member name in quotes at column 15"),
		bad(8, "line 8: not a JSON object, found a string"),
		ok(9, `{"msg_id":"6","order_no":"A-2","seq":2,"amount":"1e3","esc":"\u00e9\n"}`),
		bad(10, "line 10: unexpected end of the text in a string at column 44"), // the truncated last line
	})
	// The records that read are messages of the default contract,
	// except the one without a sequence.
	c := spool.DefaultContract()
	for _, rec := range recs {
		if rec.Err != nil {
			continue
		}
		if _, err := c.Parse(rec.JSON); err != nil {
			t.Errorf("line %d: %v", rec.Line, err)
		}
	}
}

func TestJSONL(t *testing.T) {
	jsonl := Format{Kind: JSONL}
	for _, c := range []struct {
		name, data string
		f          Format
		want       []want
	}{
		{"empty file", "", jsonl, nil},
		{"only blank lines", "\n \n\t\r\n", jsonl, nil},
		{"no final line feed", `{"a":1}`, jsonl, []want{ok(1, `{"a":1}`)}},
		{"whitespace around", " \t{\"a\" : [ 1 , 2 ] }\t\r\n", jsonl, []want{ok(1, `{"a" : [ 1 , 2 ] }`)}},
		{"two objects on a line", `{"a":1}{"b":2}` + "\n" + `{"c":3}`, jsonl,
			[]want{bad(1, "data after the object at column 8"), ok(2, `{"c":3}`)}},
		{"lines that end with CR alone", "{\"a\":1}\r{\"b\":2}\r", jsonl,
			[]want{bad(1, "data after the object at column 9, after a carriage return: the file's lines end with CR alone")}},
		{"not json", "{}\nhello\n", jsonl, []want{ok(1, `{}`), bad(2, `invalid character 'h' at column 1`)}},
		{"not json lines: a word first", "hello\n{}\n", jsonl, []want{{line: 1, err: "line 1 starts with 'h', where a JSON object starts with {: the file is not JSON Lines", tail: true}}},
		{"not json lines: a CSV export", "msg_id,amount\na,1\n", jsonl, []want{{line: 1, err: "line 1 starts with 'm'", tail: true}}},
		{"not json lines: an array after blank lines", "\n \r\n[1]\n", jsonl, []want{{line: 1, err: "line 3 starts with '['", tail: true}}},
		{"not json lines: a binary", "\x7fELF\x02\x01\n", jsonl, []want{{line: 1, err: "line 1 starts with byte 0x7F", tail: true}}},
		{"not json lines: pretty-printed json", "{\n  \"a\": 1\n}\n", jsonl, []want{{line: 1, err: "line 1 ends inside the JSON object it starts: the file is JSON written over several lines", tail: true}}},
		{"not json lines: pretty-printed after blank lines", "\r\n\n{ \"a\": [\r\n1]}\n", jsonl, []want{{line: 1, err: "line 3 ends inside the JSON object", tail: true}}},
		{"a broken object first is read as ever", "{\"a\":1,,}\n{\"b\":1}\n", jsonl, []want{bad(1, "at column 8"), ok(2, `{"b":1}`)}},
		{"the only line cut short is read as ever", "{\"a\":", jsonl, []want{bad(1, "unexpected end")}},
		{"the only line cut short, its line end kept, is read as ever", "{\"a\":\n\n", jsonl, []want{bad(1, "unexpected end")}},
		{"numbers", `{"a":-0.5e+3,"b":01}`, jsonl, []want{bad(1, "want a comma or } after a member at column 19")}},
		{"control character in a string", "{\"a\":\"x\ty\"}\n", jsonl, []want{bad(1, "control character '\\t' in a string")}},
		{"bad escape", `{"a":"\x"}`, jsonl, []want{bad(1, "invalid escape")}},
		{"files joined, each with its byte order mark", "\ufeff{\"a\":1}\r\n\ufeff{\"b\":2}\r\n\ufeff \t{\"c\":3}\n \ufeff{}\n", jsonl,
			[]want{ok(1, `{"a":1}`), ok(2, `{"b":2}`), ok(3, `{"c":3}`), bad(4, "invalid character '\\ufeff' at column 2")}},
		{"lone surrogate escape is JSON", `{"a":"\ud800"}`, jsonl, []want{ok(1, `{"a":"\ud800"}`)}},
		{"duplicate keys are left to the contract", `{"a":1,"a":2}`, jsonl, []want{ok(1, `{"a":1,"a":2}`)}},
		{"too deep", "{}\n" + strings.Repeat("[", 600), jsonl, []want{ok(1, `{}`), bad(2, "nesting deeper than 512 at column 513")}},
		{"too deep object", `{"a":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`, jsonl, []want{bad(1, "nesting deeper than 512")}},
		{"invalid utf-8", "{\"a\":\"\xc3\"}\n{\"b\":1}\n", jsonl, []want{bad(1, "invalid utf-8 byte sequence 0xC3 at byte 6"), ok(2, `{"b":1}`)}},
		{"too large line", `{"a":1}` + "\n" + `{"b":"` + strings.Repeat("x", 200) + `"}` + "\n" + `{"c":3}`, Format{Kind: JSONL, MaxSize: 64},
			[]want{ok(1, `{"a":1}`), bad(2, "line 2: a record of 209 bytes, over the limit of 64 bytes"), ok(3, `{"c":3}`)}},
		{"too large last line", `{"a":1}` + "\n" + strings.Repeat(" ", 100), Format{Kind: JSONL, MaxSize: 64},
			[]want{ok(1, `{"a":1}`), bad(2, "a record of 100 bytes")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs := readAll(t, "f.jsonl", []byte(c.data), c.f)
			checkRecords(t, []byte(c.data), recs, c.want)
			recs, err := readFrom(oneByte{strings.NewReader(c.data)}, "f.jsonl", c.f, Position{})
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, []byte(c.data), recs, c.want)
		})
	}
}

// TestJSONFormat: the JSON format is today's file: one record, its bytes
// for Contract.Parse unchecked, whatever they are.
func TestJSONFormat(t *testing.T) {
	for _, c := range []struct {
		name, data string
		f          Format
		want       []want
	}{
		{"a message", `{"msg_id":"1"}`, Format{}, []want{ok(1, `{"msg_id":"1"}`)}},
		{"empty: Parse says so", "", Format{}, []want{ok(1, "")}},
		{"anything: Parse says what", "[1]\n2\n", Format{}, []want{ok(1, "[1]\n2\n")}},
		{"decoded from its encoding", "{\"a\":\"caf\xe9\"}", Format{Encoding: "windows-1252"}, []want{ok(1, `{"a":"café"}`)}},
		{"invalid in its encoding", "{\"a\":\"\x82\"}", Format{Encoding: "shift_jis"}, []want{bad(1, "invalid shift_jis byte sequence 0x82 at byte 6")}},
		{"too large", strings.Repeat(" ", 100), Format{MaxSize: 10}, []want{bad(1, "a record of 100 bytes, over the limit of 10 bytes")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs := readAll(t, "m.json", []byte(c.data), c.f)
			checkRecords(t, []byte(c.data), recs, c.want)
			if len(recs) == 1 {
				r, _ := Open(strings.NewReader(""), "m.json", c.f)
				if d := r.DeadLetter(recs[0]); !d.Whole || d.Name != "m.json" {
					t.Errorf("dead letter %+v, want the file itself", d)
				}
			}
		})
	}
}
