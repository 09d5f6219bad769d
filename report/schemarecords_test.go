package report

import (
	"context"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/batch"
)

// TestSchemaRecords: the records of a batch file are typed by the same
// inference as JSON messages, in the order of first appearance across
// records; records that fail to read or to validate are skipped. One set
// of orders as CSV, JSON Lines (strings, as CSV's values are) and XML
// gives one schema.
func TestSchemaRecords(t *testing.T) {
	c := spool.Contract{KeyField: "msg_id", OrderField: "order_no", SeqField: "seq", AmountField: "amount", Required: []string{"msg_id"}}
	files := []struct {
		name, data string
		f          batch.Format
	}{
		{"o.csv", "msg_id,order_no,amount\n1,A,12.50\n2,B,3\n3,C\n,D,1\n", batch.Format{Kind: batch.CSV}},
		{"o.jsonl", `{"msg_id":"1","order_no":"A","amount":"12.50"}` + "\n" + `{"msg_id":"2","order_no":"B","amount":"3","note":"x"}` + "\n[]\n" + `{"msg_id":""}` + "\n",
			batch.Format{Kind: batch.JSONL}},
		{"o.xml", `<os><o msg_id="1"><order_no>A</order_no><amount>12.50</amount></o><o msg_id="2" order_no="B"><amount>3</amount><note>x</note></o><o><bad></o></os>`,
			batch.Format{Kind: batch.XML, Record: "o"}},
	}
	// The records each file's inference leaves out, and why the first:
	// CSV's "3,C" (a field short) and ",D,1" (no key), JSON Lines' [] and
	// empty key, XML's <bad>.
	skipped := map[string]struct {
		n     int
		first string
	}{
		"o.csv":   {2, "o.csv: parse: line 4: 2 fields, and the header has 3"},
		"o.jsonl": {2, "o.jsonl: parse: line 3: "},
		"o.xml":   {1, "o.xml: parse: element 3 (line 1): "},
	}
	want := map[string]string{
		"o.csv":   "field,type,role\nmsg_id,string,idempotency-key\norder_no,string,order-key\namount,number,\n",
		"o.jsonl": "field,type,role\nmsg_id,string,idempotency-key\norder_no,string,order-key\namount,number,\nnote,string,\n",
		"o.xml":   "field,type,role\nmsg_id,string,idempotency-key\norder_no,string,order-key\namount,number,\nnote,string,\n",
	}
	for _, f := range files {
		in := NewInference(c)
		r := openRecords(t, c, f.f, f.name, f.data)
		if err := in.AddRecords(context.Background(), f.name, r); err != nil {
			t.Fatal(err)
		}
		if got := schemaCSV(t, in.Rows()); got != want[f.name] {
			t.Errorf("%s:\n%s\nwant:\n%s", f.name, got, want[f.name])
		}
		if n, first := in.Skipped(); n != skipped[f.name].n || !strings.HasPrefix(first, skipped[f.name].first) {
			t.Errorf("%s: Skipped() = %d, %q; want %d, %q...", f.name, n, first, skipped[f.name].n, skipped[f.name].first)
		}
	}

	// Across files, the first file by name wins the order, whatever the
	// order they are added in; within a file, the first record.
	in := NewInference(c)
	for _, f := range []struct{ name, data string }{
		{"b.jsonl", `{"msg_id":"1","zz":1}` + "\n"},
		{"a.jsonl", `{"msg_id":"1","late":true}` + "\n" + `{"early":1,"msg_id":"2","late":false}` + "\n"},
	} {
		r := openRecords(t, c, batch.Format{Kind: batch.JSONL}, f.name, f.data)
		if err := in.AddRecords(context.Background(), f.name, r); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := schemaCSV(t, in.Rows()), "field,type,role\nmsg_id,string,idempotency-key\nlate,boolean,\nearly,integer,\nzz,integer,\n"; got != want {
		t.Errorf("order:\n%s\nwant:\n%s", got, want)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := openRecords(t, c, batch.Format{Kind: batch.JSONL}, "x.jsonl", "{}\n")
	if err := NewInference(c).AddRecords(ctx, "x.jsonl", r); err == nil {
		t.Error("AddRecords went on after its context ended")
	}
}

// openRecords reads data as the batch file name of format f, as the
// consumer reads it (batch.Files).
func openRecords(t *testing.T, c spool.Contract, f batch.Format, name, data string) spool.BatchReader {
	t.Helper()
	files, err := batch.Files(f, c)
	if err != nil {
		t.Fatal(err)
	}
	r, err := files.OpenBatch(strings.NewReader(data), name, "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}
