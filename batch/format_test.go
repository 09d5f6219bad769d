package batch

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		f    Format
		err  string // "" when the format is good
	}{
		{"zero is json", Format{}, ""},
		{"jsonl", Format{Kind: JSONL, Encoding: "windows-1252", Include: []string{"*.jsonl", "*.jsonl.gz"}, DoneFile: "{name}.done", HashKey: true}, ""},
		{"csv", Format{Kind: CSV, Delimiter: ";", Comment: "#", Encoding: "shift_jis"}, ""},
		{"csv tab", Format{Kind: CSV, Delimiter: "\t"}, ""},
		{"csv non-ascii delimiter", Format{Kind: CSV, Delimiter: "、", Encoding: "shift_jis"}, ""},
		{"xml", Format{Kind: XML, Record: "Order", Encoding: "iso-8859-1"}, ""},
		{"unknown format", Format{Kind: "yaml"}, `format "yaml" is unknown: the formats are json, jsonl, csv, xml`},
		{"format in capitals", Format{Kind: "CSV"}, `format "CSV" is unknown`},
		{"unknown encoding", Format{Encoding: "klingon"}, `encoding "klingon" is unknown`},
		{"iso-2022-jp", Format{Kind: CSV, Encoding: "csISO2022JP"}, "made of ASCII bytes"},
		{"replacement", Format{Kind: CSV, Encoding: "iso-2022-kr"}, "replacement encoding"},
		{"delimiter for jsonl", Format{Kind: JSONL, Delimiter: ";"}, "delimiter is for csv, and the format is jsonl"},
		{"comment for xml", Format{Kind: XML, Record: "a", Comment: "#"}, "comment is for csv"},
		{"two-rune delimiter", Format{Kind: CSV, Delimiter: ";;"}, `delimiter ";;" is not one character`},
		{"quote delimiter", Format{Kind: CSV, Delimiter: `"`}, "cannot be a quote"},
		{"newline comment", Format{Kind: CSV, Comment: "\n"}, "cannot be a quote, a line break"},
		{"invalid utf-8 delimiter", Format{Kind: CSV, Delimiter: "\xff"}, "not valid UTF-8"},
		{"delimiter the encoding lacks", Format{Kind: CSV, Delimiter: "€", Encoding: "shift_jis"}, "cannot be written in shift_jis"},
		{"comment is the delimiter", Format{Kind: CSV, Delimiter: ";", Comment: ";"}, "comment and delimiter are both"},
		{"comment is the default delimiter", Format{Kind: CSV, Comment: ","}, "comment and delimiter are both"},
		{"xml without record", Format{Kind: XML}, `needs "record"`},
		{"record for csv", Format{Kind: CSV, Record: "Order"}, "record is for xml"},
		{"record with prefix", Format{Kind: XML, Record: "ns:Order"}, `give the local name alone ("Order")`},
		{"record not a name", Format{Kind: XML, Record: "1Order"}, "not an XML element name"},
		{"record with space", Format{Kind: XML, Record: "Or der"}, "not an XML element name"},
		{"include empty list", Format{Include: []string{}}, "include is empty"},
		{"include empty pattern", Format{Include: []string{""}}, "include[0] is empty"},
		{"include slash", Format{Include: []string{"a/*.json"}}, "has a slash"},
		{"include twice", Format{Include: []string{"*.json", "*.json"}}, `lists "*.json" twice`},
		{"include bad pattern", Format{Include: []string{"[.json"}}, "syntax error in pattern"},
		{"gz without plain", Format{Kind: CSV, Include: []string{"*.csv.gz"}}, `include has "*.csv.gz" but not "*.csv"`},
		{"done without name", Format{DoneFile: "ready.done"}, "must hold {name} once"},
		{"done name twice", Format{DoneFile: "{name}{name}.done"}, "must hold {name} once"},
		{"done is the file", Format{DoneFile: "{name}"}, "would be the data file itself"},
		{"done slash", Format{DoneFile: "done/{name}"}, "has a slash"},
		{"done hidden", Format{DoneFile: ".{name}.done"}, "starts with a dot"},
		{"done of the data's shape", Format{Kind: CSV, Include: []string{"*.csv"}, DoneFile: "{name}.csv"}, `done_file "{name}.csv" has the shape of the data files include names ("x.csv" is of "*.csv")`},
		{"done of the default include's shape", Format{Kind: JSONL, DoneFile: "{name}.jsonl"}, `("x.jsonl" is of "*.jsonl")`},
		{"done of the shape of one pattern", Format{Kind: CSV, Include: []string{"*.csv", "*.ok"}, DoneFile: "{name}.ok"}, `("x.ok" is of "*.ok")`},
		{"done beside every name", Format{Kind: CSV, Include: []string{"*"}, DoneFile: "{name}.done"}, ""},
		{"done with a prefix", Format{Kind: CSV, Include: []string{"*.csv"}, DoneFile: "ok_{name}"}, ""},
		{"negative size", Format{MaxSize: -1}, "negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.f.Check()
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case c.err == "":
				return
			case err == nil:
				t.Fatalf("Check passed, want %q", c.err)
			case !errors.Is(err, ErrBadFormat):
				t.Errorf("%v does not wrap ErrBadFormat", err)
			case !strings.Contains(err.Error(), c.err):
				t.Errorf("Check: %v\nwant %q", err, c.err)
			}
			if _, oerr := Open(strings.NewReader(""), "x", c.f); oerr == nil {
				t.Errorf("Open took a format Check refuses")
			}
		})
	}
}

func TestSet(t *testing.T) {
	for _, c := range []struct {
		key, raw string
		want     Format
		err      string
	}{
		{"format", `"csv"`, Format{Kind: CSV}, ""},
		{"encoding", `"shift_jis"`, Format{Encoding: "shift_jis"}, ""},
		{"delimiter", `";"`, Format{Delimiter: ";"}, ""},
		{"comment", `"#"`, Format{Comment: "#"}, ""},
		{"record", `"Order"`, Format{Record: "Order"}, ""},
		{"done_file", `"{name}.ok"`, Format{DoneFile: "{name}.ok"}, ""},
		{"include", `["*.csv", "*.csv.gz"]`, Format{Include: []string{"*.csv", "*.csv.gz"}}, ""},
		{"key", `{"hash": true}`, Format{HashKey: true}, ""},
		{"format", `null`, Format{}, "format is null: give a value, or leave format out"},
		{"format", `""`, Format{}, "format is empty"},
		{"format", `3`, Format{}, "format is a number: want a string"},
		{"delimiter", `[";"]`, Format{}, "delimiter is an array"},
		{"include", `"*.csv"`, Format{}, "include is a string: want an array"},
		{"include", `["*.csv", 1]`, Format{}, "include[1] is a number"},
		{"include", `["*.csv", ""]`, Format{}, "include[1] is empty"},
		{"key", `true`, Format{}, `key is a boolean: want {"hash": true}`},
		{"key", `{}`, Format{}, "key is {}"},
		{"key", `{"hash": false}`, Format{}, "key.hash is false"},
		{"key", `{"hash": "yes"}`, Format{}, "key.hash is a string"},
		{"key", `{"hash": true, "hash": true}`, Format{}, `"hash" appears twice`},
		{"key", `{"Hash": true}`, Format{}, `unknown key "Hash" in key`},
		{"Format", `"csv"`, Format{}, `unknown key "Format": keys are case-sensitive, did you mean "format"?`},
		{"fromat", `"csv"`, Format{}, `unknown key "fromat": the format's keys are format, encoding`},
	} {
		var f Format
		err := f.Set(c.key, json.RawMessage(c.raw))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("Set(%s, %s): %v", c.key, c.raw, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrBadFormat)):
			t.Errorf("Set(%s, %s): %v, want %q", c.key, c.raw, err, c.err)
		case c.err == "" && !formatEqual(f, c.want):
			t.Errorf("Set(%s, %s) = %+v, want %+v", c.key, c.raw, f, c.want)
		}
	}
}

func formatEqual(a, b Format) bool {
	return a.Kind == b.Kind && a.Encoding == b.Encoding && a.Delimiter == b.Delimiter && a.Comment == b.Comment &&
		a.Record == b.Record && a.DoneFile == b.DoneFile && a.HashKey == b.HashKey && strings.Join(a.Include, "\x00") == strings.Join(b.Include, "\x00")
}
