package batch

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool"
)

func TestDeadLetterName(t *testing.T) {
	for _, c := range []struct {
		file string
		rec  Record
		want string
	}{
		{"orders.csv", Record{Line: 17}, "orders~L17.csv"},
		{"orders.csv.gz", Record{Line: 17}, "orders~L17.csv"},
		{"orders.xml", Record{Line: 40, Element: 5}, "orders~E5.xml"},
		{"orders.xml.gz", Record{Line: 40, Element: 5}, "orders~E5.xml"},
		{"orders.2024-06.jsonl", Record{Line: 3}, "orders.2024-06~L3.jsonl"},
		{"orders", Record{Line: 3}, "orders~L3"},
		{"orders.gz", Record{Line: 3}, "orders~L3"},
		{".gz", Record{Line: 3}, ".gz~L3"},
		{strings.Repeat("é", 126) + ".csv", Record{Line: 123456}, strings.Repeat("é", 121) + "~L123456.csv"},
	} {
		got := deadLetterName(c.file, c.rec)
		if got != c.want || len(got) > 255 {
			t.Errorf("%s: %s, want %s", c.file, got, c.want)
		}
		if c.file != ".gz" && !isDeadLetterName(got) {
			t.Errorf("%s is not recognised as a dead letter's name", got)
		}
	}
	for _, n := range []string{"orders.csv", "orders~2.csv", "orders~L0.csv", "orders~L.csv", "orders~Lx1.csv", "~L1.csv", "orders~X1.csv"} {
		if isDeadLetterName(n) {
			t.Errorf("%s taken for a dead letter's name", n)
		}
	}
}

// TestDeadLetterReplays: the dead letter of each failed record of each
// test file, once fixed by hand as an operator would, is read again by
// the same format and encoding as one record; unfixed, as the same
// failure. Its bytes are the file's, in the file's encoding.
func TestDeadLetterReplays(t *testing.T) {
	files := resumeFiles(t)
	files = append(files, struct {
		file string
		data []byte
		f    Format
	}{"bad.sjis.csv", []byte("id,note\n1,\x82\n2,ok\n"), Format{Kind: CSV, Encoding: "shift_jis"}})
	for _, tf := range files {
		r, err := Open(bytes.NewReader(gz(t, tf.data)), tf.file+".gz", tf.f)
		if err != nil {
			t.Fatal(err)
		}
		all, err := readFrom(bytes.NewReader(tf.data), tf.file, tf.f, Position{})
		if err != nil {
			t.Fatal(err)
		}
		for range all {
			rec, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if rec.Err == nil || rec.Tail {
				continue
			}
			d := r.DeadLetter(rec)
			if d.Whole || d.Content == nil || filepath.Ext(d.Name) != filepath.Ext(tf.file) || !isDeadLetterName(d.Name) {
				t.Errorf("%s %s: dead letter %+v", tf.file, rec.Origin(), d)
				continue
			}
			again := readAll(t, d.Name, d.Content, tf.f)
			if len(again) != 1 || again[0].Err == nil || again[0].Err.Reason != rec.Err.Reason {
				t.Errorf("%s %s: the dead letter %q reads as\n%s", tf.file, rec.Origin(), d.Content, describeAll(again))
			}
		}
	}
	// Fixed: the CSV row with a column too many, without it.
	data := testdata(t, "orders.csv")
	recs := readAll(t, "orders.csv", data, Format{Kind: CSV})
	r, _ := Open(bytes.NewReader(data), "orders.csv", Format{Kind: CSV})
	for range recs {
		rec, _ := r.Next()
		if rec.Err != nil {
			d := r.DeadLetter(rec)
			fixed := bytes.Replace(d.Content, []byte(",extra,column"), []byte(",extra"), 1)
			got := readAll(t, d.Name, fixed, Format{Kind: CSV})
			if len(got) != 1 || string(got[0].JSON) != `{"msg_id":"12","order_no":"A-6","amount":"7","note":"extra"}` {
				t.Errorf("fixed %s reads as\n%s", d.Name, describeAll(got))
			}
		}
	}
}

// TestDeadLetterKeepsUTF8Mark: a file that starts with UTF-8's byte order
// mark is read as UTF-8 in a queue of any encoding, and its dead letters
// keep the mark: fixed and replayed into the same queue, they are read as
// UTF-8 again, their characters intact (without it, a JSON Lines line of
// Tokyo read as Shift_JIS is mojibake).
func TestDeadLetterKeepsUTF8Mark(t *testing.T) {
	for _, c := range []struct {
		name, data, bad, fix, want string
		f                          Format
	}{
		{"orders.jsonl", "\ufeff{\"a\":\"ok\"}\n{\"a\":\"\u6771\u4eac\"\n", "\"\u6771\u4eac\"\n", "\"\u6771\u4eac\"}\n",
			"{\"a\":\"\u6771\u4eac\"}", Format{Kind: JSONL, Encoding: "shift_jis"}},
		{"orders.csv", "\ufeffid,name\n1,M\u00fcller,x\n", ",x\n", "\n",
			"{\"id\":\"1\",\"name\":\"M\u00fcller\"}", Format{Kind: CSV, Encoding: "windows-1252"}},
		{"orders.xml", "\ufeff<?xml version=\"1.0\"?>\n<rs><r a=\"\ub611\"><b></r></rs>", "<b></r>", "</r>",
			"{\"a\":\"\ub611\"}", Format{Kind: XML, Record: "r", Encoding: "euc-kr"}},
	} {
		r, err := Open(strings.NewReader(c.data), c.name, c.f)
		if err != nil {
			t.Fatal(err)
		}
		var d DeadLetter
		for {
			rec, err := r.Next()
			if err != nil {
				t.Fatalf("%s: no failed record: %v", c.name, err)
			}
			if rec.Err != nil {
				d = r.DeadLetter(rec)
				break
			}
		}
		if !bytes.HasPrefix(d.Content, bomUTF8) {
			t.Errorf("%s: dead letter %q without the mark", c.name, d.Content)
		}
		fixed := bytes.Replace(d.Content, []byte(c.bad), []byte(c.fix), 1)
		got := readAll(t, d.Name, fixed, c.f)
		if len(got) != 1 || string(got[0].JSON) != c.want {
			t.Errorf("%s: the fixed dead letter %q reads as\n%s", c.name, fixed, describeAll(got))
		}
	}
}

// TestDeadLetterOverLimit: a record over the limit is not held; its dead
// letter is the prefix and a range CopyRange copies from the file.
func TestDeadLetterOverLimit(t *testing.T) {
	long := strings.Repeat("x", 300)
	data := []byte("id,v\n1," + long + "\n2,y\n")
	for _, name := range []string{"big.csv", "big.csv.gz"} {
		src := data
		if strings.HasSuffix(name, ".gz") {
			src = gz(t, data)
		}
		f := Format{Kind: CSV, MaxSize: 100}
		r, err := Open(bytes.NewReader(src), name, f)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := r.Next()
		if err != nil || rec.Err == nil || rec.Err.Reason != "too-large" || rec.Raw != nil {
			t.Fatalf("%s: %+v %v", name, rec, err)
		}
		d := r.DeadLetter(rec)
		if d.Content != nil || string(d.Prefix) != "id,v\n" || d.Name != "big~L2.csv" {
			t.Fatalf("%s: dead letter %+v", name, d)
		}
		var b bytes.Buffer
		b.Write(d.Prefix)
		if err := f.CopyRange(&b, bytes.NewReader(src), name, d.Start, d.End); err != nil {
			t.Fatal(err)
		}
		if want := "id,v\n1," + long + "\n"; b.String() != want {
			t.Errorf("%s: copied %q", name, b.String())
		}
		if err := f.CopyRange(&b, bytes.NewReader(src), name, d.Start, int64(len(data))+1); err == nil {
			t.Errorf("%s: a range past the end copied", name)
		}
	}
}

func TestKey(t *testing.T) {
	csv := readAll(t, "k.csv", []byte("id,amount,note\n1,2.50,\"a\tb\"\n"), Format{Kind: CSV})
	jsonl := readAll(t, "k.jsonl", []byte(`{ "note" : "a\u0009b", "amount":"2.50","id":"1"}`+"\n"), Format{Kind: JSONL})
	xml := readAll(t, "k.xml", []byte("<r><o id=\"1\"><amount>2.50</amount><note>a&#9;b</note></o></r>"), Format{Kind: XML, Record: "o"})
	var keys []string
	for _, recs := range [][]Record{csv, jsonl, xml} {
		k, err := recs[0].Key()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	// echo -n '{"amount":"2.50","id":"1","note":"a\tb"}' | sha256sum
	const want = "74689614bf1dfb860e03e9fe6445955b55851af2f125f474c7ceca416756a6b4"
	for i, k := range keys {
		if k != want {
			t.Errorf("key %d is %s, want %s", i, k, want)
		}
	}
	for _, c := range []struct{ a, b string }{
		{`{"a":1}`, `{"a":1.0}`},
		{`{"a":1}`, `{"a":"1"}`},
		{`{"a":"x"}`, `{"a":"x "}`},
		{`{"a":{"b":1,"c":2}}`, `{"a":{"b":2,"c":1}}`},
		{`{"a":[1,2]}`, `{"a":[2,1]}`},
	} {
		ka, _ := Key([]byte(c.a))
		kb, _ := Key([]byte(c.b))
		if ka == kb {
			t.Errorf("%s and %s have one key", c.a, c.b)
		}
	}
	for _, c := range []struct{ in, canon string }{
		{` { "b" : [ 1 , { "d":true, "c":null } ], "a" : "\u00e9\/\"" } `, `{"a":"é/\"","b":[1,{"c":null,"d":true}]}`},
		{`{"\u0061":1}`, `{"a":1}`},
		{`{"s":"\ud83d\ude00 \ud800 \u001F \b"}`, `{"s":"😀 \ud800 \u001f \b"}`},
		{`[]`, `[]`},
	} {
		got, err := canonicalJSON([]byte(c.in))
		if err != nil || string(got) != c.canon {
			t.Errorf("canonical %s = %s, %v; want %s", c.in, got, err, c.canon)
		}
	}
	for _, in := range []string{`{"a":1,"a":2}`, `{"a":1}x`, `{`, ``} {
		if _, err := Key([]byte(in)); err == nil {
			t.Errorf("key of %q passed", in)
		}
	}
	if _, err := jsonl[0].Key(); err != nil {
		t.Error(err)
	}
	failed := Record{Line: 3, Err: &spool.RejectError{Reason: spool.ReasonParse, Detail: "line 3: bad"}}
	if _, err := failed.Key(); err == nil {
		t.Error("a failed record has a key")
	}
}

// TestDoneFileNames: which names are data files (Includes), which
// done-file announces one (DoneName) and which data file a done-file
// announces (DataName); a done-file is never data, even for a pattern
// that matches all, and names starting with "." are neither.
func TestDoneFileNames(t *testing.T) {
	f := Format{Kind: CSV, Include: []string{"*.csv", "*.csv.gz"}, DoneFile: "{name}.done"}
	for name, data := range map[string]bool{"b.csv": true, "a.csv.gz": true, "e~L17.csv": true,
		"b.csv.done": false, ".f.csv": false, "g.txt": false, "g.txt.done": false} {
		if f.Includes(name) != data {
			t.Errorf("Includes(%q) = %v", name, !data)
		}
	}
	if got := f.DoneName("a.csv.gz"); got != "a.csv.gz.done" {
		t.Errorf("DoneName(a.csv.gz) = %q", got)
	}
	for done, want := range map[string]string{"b.csv.done": "b.csv", "g.txt.done": "g.txt", "b.csv": "", ".done": ""} {
		got, ok := f.DataName(done)
		if got != want || ok != (want != "") {
			t.Errorf("DataName(%q) = %q, %v; want %q", done, got, ok, want)
		}
	}
	// Without a done-file: the default include is the format's extension,
	// and nothing is a done-file.
	j := Format{Kind: JSONL}
	if !j.Includes("x.jsonl") || j.Includes("y.json") || j.Includes(".t.jsonl") || j.DoneName("x.jsonl") != "" {
		t.Error("JSON Lines without a done-file")
	}
	if _, ok := j.DataName("z.jsonl.done"); ok {
		t.Error("a done-file without DoneFile")
	}
	all := Format{Include: []string{"*"}, DoneFile: "done-{name}"}
	if all.Includes("done-a") || !all.Includes("a") || !all.Includes("done-") || all.DoneName("a") != "done-a" {
		t.Error("include *: Includes or DoneName")
	}
	if got, ok := all.DataName("done-b"); got != "b" || !ok {
		t.Errorf("include *: DataName(done-b) = %q, %v", got, ok)
	}
	if (Format{}).DoneName("a.json") != "" || !(Format{}).Includes("a.json") || (Format{}).Includes(".json") {
		t.Error("the JSON format's files")
	}
}
