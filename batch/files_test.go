package batch

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/spoolq/spool"
)

// consumerRecords reads data as the consumer does (Files), after position.
func consumerRecords(t *testing.T, f Format, c spool.Contract, name, data, position string) []spool.BatchRecord {
	t.Helper()
	fs, err := Files(f, c)
	if err != nil {
		t.Fatal(err)
	}
	r, err := fs.OpenBatch(strings.NewReader(data), name, position)
	if err != nil {
		t.Fatal(err)
	}
	var out []spool.BatchRecord
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
}

// TestFilesSeq: for CSV a seq of decimal digits is the number it spells,
// which the contract checks as ever (0 refused); any other text stays a
// string, refused as one; the other values stay strings.
func TestFilesSeq(t *testing.T) {
	c := spool.DefaultContract()
	data := "msg_id,order_no,seq,amount\na,o,17,1.50\nb,o,0,1\nc,o,1.0,1\nd,o,007,1\ne,o,-2,1\n"
	recs := consumerRecords(t, Format{Kind: CSV}, c, "o.csv", data, "")
	if len(recs) != 5 {
		t.Fatalf("%d records, want 5", len(recs))
	}
	if got := string(recs[0].JSON); got != `{"msg_id":"a","order_no":"o","seq":17,"amount":"1.50"}` {
		t.Errorf("a's JSON is %s", got)
	}
	m, err := c.Parse(recs[0].JSON)
	if err != nil || m.Seq != 17 || m.Amount != "1.50" {
		t.Errorf("a parses to %+v, %v; want seq 17, amount 1.50", m, err)
	}
	for _, i := range []int{1, 2, 3, 4} {
		var rej *spool.RejectError
		if _, err := c.Parse(recs[i].JSON); !errors.As(err, &rej) || rej.Field != "seq" {
			t.Errorf("record %d (%s) parses with %v, want seq refused", i, recs[i].JSON, err)
		}
	}
	if recs[0].Origin != "L2" || recs[0].DeadLetter != "o~L2.csv" || recs[0].After == "" {
		t.Errorf("a: origin %q, dead letter %q, after %q", recs[0].Origin, recs[0].DeadLetter, recs[0].After)
	}
	var dl bytes.Buffer
	if err := recs[1].WriteDeadLetter(&dl); err != nil || dl.String() != "msg_id,order_no,seq,amount\nb,o,0,1\n" {
		t.Errorf("b's dead letter is %q, %v; want the header and its row", dl.String(), err)
	}
	// JSON Lines keeps its values as they are typed: a string seq is
	// refused as ever.
	recs = consumerRecords(t, Format{Kind: JSONL}, c, "o.jsonl", `{"msg_id":"a","order_no":"o","seq":"3","amount":1}`+"\n", "")
	if _, err := c.Parse(recs[0].JSON); err == nil {
		t.Error(`a JSON Lines seq of "3" was accepted, want it refused as a string`)
	}
}

// TestFilesResume: OpenBatch at a record's After goes on with the next.
// TestFilesXMLNumbers: in an XML record the seq and amount fields' text
// is read without the white space around it, as XML Schema reads its
// numbers (a pretty-printer's <seq>\n  6\n</seq>); every other field, the
// key among them, keeps its text, and so do fields of other names, of
// other contracts, and nested.
func TestFilesXMLNumbers(t *testing.T) {
	c := spool.DefaultContract()
	c.AmountField = "total"
	c.Required = []string{"msg_id", "order_no", "seq", "total"}
	data := "<rs><r>\n  <msg_id> a </msg_id>\n  <order_no>o</order_no>\n  <seq>\n    6\n  </seq>\n  <total>\t5.00 </total>\n" +
		"  <amount> 1 </amount><x><seq> 2 </seq></x><note> n </note>\n</r>" +
		"<r><msg_id>b</msg_id><order_no>o</order_no><seq> 0 </seq><total> 1,5 </total></r>" +
		"<r><msg_id>c</msg_id><order_no>o</order_no><seq a=\"1\"> 7 </seq><total>1</total></r>" +
		"<r seq=\" 8\" total=\"2.5 \" note=\" n \"><msg_id>d</msg_id><order_no>o</order_no></r></rs>"
	recs := consumerRecords(t, Format{Kind: XML, Record: "r"}, c, "o.xml", data, "")
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4", len(recs))
	}
	// Attributes alike.
	if got, want := string(recs[3].JSON), `{"seq":8,"total":"2.5","note":" n ","msg_id":"d","order_no":"o"}`; got != want {
		t.Errorf("d's JSON is\n%s\nwant\n%s", got, want)
	}
	want := `{"msg_id":" a ","order_no":"o","seq":6,"total":"5.00","amount":" 1 ","x":{"seq":" 2 "},"note":" n "}`
	if got := string(recs[0].JSON); got != want {
		t.Errorf("a's JSON is\n%s\nwant\n%s", got, want)
	}
	if m, err := c.Parse(recs[0].JSON); err != nil || m.Seq != 6 || m.Amount != "5.00" {
		t.Errorf("a parses to %+v, %v; want seq 6, amount 5.00", m, err)
	}
	// Trimmed, what is no number is still refused as written.
	for i, field := range []string{"seq", "seq"} {
		var rej *spool.RejectError
		if _, err := c.Parse(recs[i+1].JSON); !errors.As(err, &rej) || rej.Field != field {
			t.Errorf("record %d (%s) parses with %v, want %s refused", i+1, recs[i+1].JSON, err, field)
		}
	}
	var dl bytes.Buffer
	if err := recs[1].WriteDeadLetter(&dl); err != nil || !strings.Contains(dl.String(), "<seq> 0 </seq><total> 1,5 </total>") {
		t.Errorf("b's dead letter is %q, %v; want its text as written", dl.String(), err)
	}
}

// TestFilesEmptyOptional: in CSV and XML an empty value of a field the
// contract reads and does not require is the field left out, as a JSON
// producer leaves it out; a required one stays an empty string, refused.
func TestFilesEmptyOptional(t *testing.T) {
	c := spool.DefaultContract()
	c.Required = []string{"msg_id", "seq"}
	c.Headers.Trace = "trace"
	csvData := "msg_id,order_no,seq,amount,trace,note\na,,1,,,\nb,o,,1,,x\n"
	xmlData := "<rs><r><msg_id>a</msg_id><order_no/><seq>1</seq><amount></amount><trace/><note/></r>" +
		"<r><msg_id>b</msg_id><order_no>o</order_no><seq/><amount>1</amount><note>x</note></r></rs>"
	for _, tc := range []struct {
		f    Format
		name string
		data string
		want string
	}{
		{Format{Kind: CSV}, "o.csv", csvData, `{"msg_id":"a","order_no":null,"seq":1,"amount":null,"trace":null,"note":""}`},
		{Format{Kind: XML, Record: "r"}, "o.xml", xmlData, `{"msg_id":"a","order_no":null,"seq":1,"amount":null,"trace":null,"note":""}`},
	} {
		recs := consumerRecords(t, tc.f, c, tc.name, tc.data, "")
		if len(recs) != 2 {
			t.Fatalf("%s: %d records, want 2", tc.name, len(recs))
		}
		if got := string(recs[0].JSON); got != tc.want {
			t.Errorf("%s: a's JSON is\n%s\nwant\n%s", tc.name, got, tc.want)
		}
		if m, err := c.Parse(recs[0].JSON); err != nil || m.OrderNo != "" || m.Amount != "" {
			t.Errorf("%s: a parses to %+v, %v; want no order key and no amount", tc.name, m, err)
		}
		var rej *spool.RejectError
		if _, err := c.Parse(recs[1].JSON); !errors.As(err, &rej) || rej.Field != "seq" || !strings.Contains(rej.Detail, "found an empty string") {
			t.Errorf("%s: b (%s) parses with %v, want its required seq refused as an empty string", tc.name, recs[1].JSON, err)
		}
	}
}

func TestFilesResume(t *testing.T) {
	c := spool.DefaultContract()
	data := "msg_id,order_no,seq,amount\na,o,1,1\nb,o,2,2\nc,o,3,3\n"
	all := consumerRecords(t, Format{Kind: CSV}, c, "o.csv", data, "")
	rest := consumerRecords(t, Format{Kind: CSV}, c, "o.csv", data, all[0].After)
	if len(rest) != 2 || rest[0].Index != 1 || rest[0].Origin != "L3" || string(rest[1].JSON) != string(all[2].JSON) {
		t.Fatalf("resumed after a: %+v", rest)
	}
	p, err := ParsePosition(all[1].After)
	if err != nil || p.String() != all[1].After {
		t.Errorf("ParsePosition(%q) = %+v, %v", all[1].After, p, err)
	}
	for _, bad := range []string{"", "1:2", "a:b:c", "1:2:3:4"} {
		if _, err := ParsePosition(bad); err == nil {
			t.Errorf("ParsePosition(%q): nil error", bad)
		}
	}
}

// TestFilesHashKey: with HashKey the record's key is put in the
// contract's key field, the same for the same fields in any order.
func TestFilesHashKey(t *testing.T) {
	c := spool.DefaultContract()
	c.Required = []string{"msg_id"}
	a := consumerRecords(t, Format{Kind: CSV, HashKey: true}, c, "o.csv", "item,qty\nbolt,1\n", "")
	b := consumerRecords(t, Format{Kind: JSONL, HashKey: true}, c, "o.jsonl", `{"qty":"1","item":"bolt"}`+"\n", "")
	ma, err := c.Parse(a[0].JSON)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Key([]byte(`{"item":"bolt","qty":"1"}`))
	if ma.MsgID != want {
		t.Errorf("hashed key %q, want %q", ma.MsgID, want)
	}
	mb, err := c.Parse(b[0].JSON)
	if err != nil || mb.MsgID != ma.MsgID {
		t.Errorf("the JSON Lines record's key is %v (%v), want the CSV row's %q", mb, err, ma.MsgID)
	}
}

// TestFilesBatched: the JSON format is not batched; the others are.
func TestFilesBatched(t *testing.T) {
	for kind, want := range map[string]bool{JSON: false, JSONL: true, CSV: true} {
		fs, err := Files(Format{Kind: kind}, spool.DefaultContract())
		if err != nil {
			t.Fatal(err)
		}
		if got := fs.Batched("x"); got != want {
			t.Errorf("Batched for %s = %v, want %v", kind, got, want)
		}
	}
	if _, err := Files(Format{Kind: "yaml"}, spool.DefaultContract()); !errors.Is(err, ErrBadFormat) {
		t.Errorf("Files of an unknown format: %v, want ErrBadFormat", err)
	}
}

// TestFilesRequiredColumns: a CSV header without a column for a field
// the contract requires (the key field unless HashKey makes it) fails
// the whole file, where every row would fail alone; the message names a
// column that differs only by spaces or case. A header that has them all
// reads as ever.
func TestFilesRequiredColumns(t *testing.T) {
	c := spool.DefaultContract()
	for _, tc := range []struct {
		name, data, err string
		f               Format
		c               spool.Contract
	}{
		{"another export", "id,customer,total\n1,a,2\n", `no column "msg_id", which the contract requires`, Format{Kind: CSV}, c},
		{"spaces after the commas", "msg_id, order_no, seq, amount\na,o,1,1\n", `no column "order_no", which the contract requires: every row would fail; the header has " order_no": a space after the delimiter is part of the field in CSV, write the file without one`, Format{Kind: CSV}, c},
		{"case", "MSG_ID,order_no,seq,amount\na,o,1,1\n", `no column "msg_id", which the contract requires: every row would fail; the header has "MSG_ID"`, Format{Kind: CSV}, c},
		{"semicolons", "msg_id;order_no;seq;amount\na;o;1;1,50\n", `no column "msg_id", which the contract requires: every row would fail; the header is one field that ";" splits: set the delimiter to ";"`, Format{Kind: CSV}, c},
		{"tabs", "msg_id\torder_no\tseq\tamount\na\to\t1\t1.50\n", `the header is one field that "\t" splits: set the delimiter to "\t"`, Format{Kind: CSV}, c},
		{"commas in a queue of semicolons", "msg_id,order_no,seq,amount\na,o,1,1\n", `the header is one field that "," splits: set the delimiter to ","`, Format{Kind: CSV, Delimiter: ";"}, c},
		{"hashed key", "item,qty\nbolt,1\n", "", Format{Kind: CSV, HashKey: true}, spool.Contract{KeyField: "msg_id", Required: []string{"msg_id", "item"}}},
		{"hashed key, a required field missing", "item,qty\nbolt,1\n", `no column "sku"`, Format{Kind: CSV, HashKey: true}, spool.Contract{KeyField: "msg_id", Required: []string{"sku"}}},
		{"all there, more besides", "note,amount,seq,order_no,msg_id\nx,1,1,o,a\n", "", Format{Kind: CSV}, c},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := consumerRecords(t, tc.f, tc.c, "o.csv", tc.data, "")
			switch {
			case tc.err == "" && (len(recs) != 1 || recs[0].Reject != nil):
				t.Fatalf("%d records, %+v; want the row", len(recs), recs)
			case tc.err != "" && (len(recs) != 1 || !recs[0].Whole || recs[0].Reject == nil || !strings.Contains(recs[0].Reject.Detail, tc.err)):
				t.Fatalf("%d records, %+v; want the whole file failed with %q", len(recs), recs, tc.err)
			}
		})
	}
}
