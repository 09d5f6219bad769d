package report

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/internal/sample"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
)

// setup returns an open queue in a temp directory and a real SQLite ledger
// inside it, both closed when the test ends.
func setup(t *testing.T) (*queue.Dir, *ledger.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "q")
	if err := queue.Init(path); err != nil {
		t.Fatal(err)
	}
	d, err := queue.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	l, err := sqlite.Open(context.Background(), filepath.Join(path, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return d, l
}

func put(t *testing.T, d *queue.Dir, s queue.Stage, name, data string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(d.StagePath(s), name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// consumeLab writes the lab sample into inbox/ and drains it.
func consumeLab(t *testing.T, d *queue.Dir, l *ledger.DB) {
	t.Helper()
	for _, f := range sample.Lab() {
		if _, err := d.WriteFile(queue.Inbox, f.Name, f.Data); err != nil {
			t.Fatal(err)
		}
	}
	c, err := spool.NewConsumer(d, l.Consumer(), spool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := spool.Stats{Processed: sample.LabUnique, Duplicates: sample.LabDuplicates, DeadLetters: sample.LabDeadLetters}
	// Passes is how the run went, not what it did: not compared.
	st.Passes = 0
	if st != want {
		t.Fatalf("drain of the lab: %+v, want %+v", st, want)
	}
}

func schemaCSV(t *testing.T, rows []SchemaRow) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteSchemaCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestSchema(t *testing.T) {
	type file struct{ name, data string }
	custom := spool.Contract{KeyField: "id", OrderField: "account", SeqField: "n", AmountField: "value",
		Required: []string{"id"}}
	tests := []struct {
		name     string
		contract spool.Contract
		files    []file // written in this order, which is not name order
		want     string
	}{
		{
			name: "empty inbox",
			want: "field,type,role\n",
		},
		{
			name: "integer and decimal mix to number, nulls ignored, only-null is null",
			files: []file{
				{"b.json", `{"msg_id":"2","order_no":"A","seq":2,"amount":1.5,"note":null,"tag":null}`},
				{"a.json", `{"msg_id":"1","order_no":"A","seq":1,"amount":3,"note":"x","tag":null}`},
			},
			want: "field,type,role\nmsg_id,string,idempotency-key\norder_no,string,order-key\nseq,integer,sequence\namount,number,\nnote,string,\ntag,null,\n",
		},
		{
			name: "other mixes join kinds in a fixed order",
			files: []file{
				{"c.json", `{"msg_id":3,"order_no":"A","seq":3,"amount":"7","x":[1],"y":{"k":1}}`},
				{"a.json", `{"msg_id":"1","order_no":7,"seq":1,"amount":1,"x":true,"y":"s"}`},
				{"b.json", `{"msg_id":"2","order_no":"A","seq":2,"amount":2.5,"x":{},"y":1}`},
			},
			want: "field,type,role\nmsg_id,string|integer,idempotency-key\norder_no,string|integer,order-key\nseq,integer,sequence\namount,number,\nx,boolean|object|array,\ny,string|integer|object,\n",
		},
		{
			name: "first appearance in name order, then document order",
			files: []file{
				{"z.json", `{"zz":1,"msg_id":"3","order_no":"A","seq":3,"amount":1,"aa":1}`},
				{"m.json", `{"amount":1,"seq":2,"order_no":"A","msg_id":"2","late":1}`},
				{"n.json", `{"msg_id":"4","order_no":"A","seq":4,"amount":1,"aa":2}`},
			},
			want: "field,type,role\namount,integer,\nseq,integer,sequence\norder_no,string,order-key\nmsg_id,string,idempotency-key\nlate,integer,\naa,integer,\nzz,integer,\n",
		},
		{
			name: "invalid messages and non-messages are skipped",
			files: []file{
				{"a.json", `{"msg_id":"1","order_no":"A","seq":1,"amount":1}`},
				{"b.json", `{"msg_id":"2","order_no":"A","seq":1,"amount":1,"parse_only":` /* truncated */},
				{"c.json", `{"msg_id":"3","order_no":"A","seq":1,"missing_amount":1}`},
				{"d.json", `{"msg_id":"4","order_no":"A","seq":0,"amount":1,"bad_seq":1}`},
				{"e.json", `[{"msg_id":"5"}]`},
				{"notes.txt", `{"msg_id":"6","order_no":"A","seq":1,"amount":1,"txt":1}`},
				{".hidden.json", `{"msg_id":"7","order_no":"A","seq":1,"amount":1,"hidden":1}`},
			},
			want: "field,type,role\nmsg_id,string,idempotency-key\norder_no,string,order-key\nseq,integer,sequence\namount,integer,\n",
		},
		{
			name:     "roles follow the contract",
			contract: custom,
			files: []file{
				{"a.json", `{"id":"1","account":"X","n":1,"value":"1.00","msg_id":"not the key"}`},
				{"b.json", `{"id":"2"}`},
			},
			want: "field,type,role\nid,string,idempotency-key\naccount,string,order-key\nn,integer,sequence\nvalue,number,\nmsg_id,string,\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _ := setup(t)
			for _, f := range tt.files {
				put(t, d, queue.Inbox, f.name, f.data)
			}
			c := tt.contract
			if c.KeyField == "" {
				c = spool.DefaultContract()
			}
			in, err := Schema(context.Background(), d, c, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := schemaCSV(t, in.Rows()); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestSchemaSkipsSpecialFilesAndOversize(t *testing.T) {
	d, _ := setup(t)
	put(t, d, queue.Inbox, "a.json", `{"msg_id":"1","order_no":"A","seq":1,"amount":1}`)
	outside := filepath.Join(t.TempDir(), "outside.json")
	if err := os.WriteFile(outside, []byte(`{"msg_id":"9","order_no":"A","seq":1,"amount":1,"secret":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(d.StagePath(queue.Inbox), "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := mkfifo(filepath.Join(d.StagePath(queue.Inbox), "fifo.json")); err != nil {
		t.Fatal(err)
	}
	put(t, d, queue.Inbox, "big.json", `{"msg_id":"2","order_no":"A","seq":1,"amount":1,"big":"`+strings.Repeat("x", 200)+`"}`)
	c := spool.DefaultContract()
	c.MaxSize = 100
	done := make(chan struct{})
	var in *Inference
	var err error
	go func() { in, err = Schema(context.Background(), d, c, nil); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Schema blocked (on the FIFO?)")
	}
	if err != nil {
		t.Fatal(err)
	}
	want := "field,type,role\nmsg_id,string,idempotency-key\norder_no,string,order-key\nseq,integer,sequence\namount,integer,\n"
	if got := schemaCSV(t, in.Rows()); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	// The message over the limit is counted as skipped; a link and a
	// FIFO are no messages.
	if n, first := in.Skipped(); n != 1 || !strings.HasPrefix(first, "big.json: ") {
		t.Errorf("Skipped() = %d, %q; want big.json alone", n, first)
	}
}

func TestSchemaLab(t *testing.T) {
	d, _ := setup(t)
	for _, f := range sample.Lab() {
		if _, err := d.WriteFile(queue.Inbox, f.Name, f.Data); err != nil {
			t.Fatal(err)
		}
	}
	in, err := Schema(context.Background(), d, spool.DefaultContract(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := in.Rows()
	want := "field,type,role\n" +
		"msg_id,string,idempotency-key\n" +
		"order_no,string,order-key\n" +
		"seq,integer,sequence\n" +
		"event_type,string,\n" +
		"amount,number,\n" +
		"currency,string,\n" +
		"customer,object,\n" +
		"created_at,string,\n" +
		"items,array,\n" +
		"payment,object,\n" +
		"coupon,string,\n" +
		"warehouse,string,\n" +
		"carrier,string,\n" +
		"tracking,string,\n" +
		"signed_by,string,\n" +
		"refund_of,string,\n" +
		"partial,boolean,\n"
	if got := schemaCSV(t, rows); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestErrors(t *testing.T) {
	d, l := setup(t)
	consumeLab(t, d, l)
	// A file dropped into error/ by hand has no record.
	put(t, d, queue.Error, "0000-by-hand.json", `{}`)
	// Not a message name: not listed.
	put(t, d, queue.Error, "README.txt", "x")
	rows, err := Errors(context.Background(), d, l)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteErrorsCSV(&b, rows, false); err != nil {
		t.Fatal(err)
	}
	want := "file,reason\n0000-by-hand.json,unknown\n0019-ORD-1005-1.json,parse\n0020-ORD-1005-2.json,missing-field\n"
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if rows[2].Field != "amount" || rows[2].Detail == "" || rows[2].At.IsZero() {
		t.Errorf("missing-field row = %+v, want field amount with detail and time", rows[2])
	}
	b.Reset()
	if err := WriteErrorsCSV(&b, rows[2:], true); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.HasPrefix(got, "file,reason,field,detail\n0020-ORD-1005-2.json,missing-field,amount,") || strings.Count(got, "\n") != 2 {
		t.Errorf("with detail:\n%s", got)
	}
}

func TestErrorsAfterRename(t *testing.T) {
	d, l := setup(t)
	consumeLab(t, d, l)
	// A dead letter renamed with a collision suffix is still found; one
	// renamed to an unrelated name is not trusted.
	errDir := d.StagePath(queue.Error)
	if err := os.Rename(filepath.Join(errDir, "0019-ORD-1005-1.json"), filepath.Join(errDir, "0019-ORD-1005-1~2.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(errDir, "0020-ORD-1005-2.json"), filepath.Join(errDir, "other.json")); err != nil {
		t.Fatal(err)
	}
	rows, err := Errors(context.Background(), d, l)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, r := range rows {
		got = append(got, r.File+"="+r.Reason)
	}
	want := []string{"0019-ORD-1005-1~2.json=parse", "other.json=unknown"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestSameMessage(t *testing.T) {
	tests := []struct {
		stored, recorded string
		want             bool
	}{
		{"a.json", "a.json", true},
		{"a~2.json", "a.json", true},
		{"a~13.json", "a.json", true},
		{"a~2~2.json", "a~2.json", true},
		{"a~.json", "a.json", false},
		{"a~x.json", "a.json", false},
		{"b~2.json", "a.json", false},
		{"b.json", "a.json", false},
		{"ab~2.json", "a.json", false},
		{"a\xff.json", "a\uFFFD.json", true},
	}
	for _, tt := range tests {
		if got := sameMessage(tt.stored, tt.recorded); got != tt.want {
			t.Errorf("sameMessage(%q, %q) = %v, want %v", tt.stored, tt.recorded, got, tt.want)
		}
	}
}

func TestWriteOrderCheck(t *testing.T) {
	tests := []struct {
		name     string
		problems []ledger.OrderProblem
		want     string
		ok       bool
	}{
		{"none", nil, "OK\n", true},
		{"some", []ledger.OrderProblem{
			{OrderNo: "A", Seq: "2-4", Problem: "missing"},
			{OrderNo: "A", Seq: "7", Problem: "duplicate"},
			{OrderNo: "B,1", Seq: "1", Problem: "missing"},
		}, "order_no,seq,problem\nA,2-4,missing\nA,7,duplicate\n\"B,1\",1,missing\n", false},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		ok, err := WriteOrderCheck(&b, tt.problems)
		if err != nil {
			t.Fatal(err)
		}
		if ok != tt.ok || b.String() != tt.want {
			t.Errorf("%s: ok=%v\n%s\nwant ok=%v\n%s", tt.name, ok, b.String(), tt.ok, tt.want)
		}
	}
}

func TestOrderCheckLab(t *testing.T) {
	d, l := setup(t)
	consumeLab(t, d, l)
	ps, err := l.Messages().OrderCheck(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if ok, err := WriteOrderCheck(&b, ps); err != nil || !ok || b.String() != "OK\n" {
		t.Errorf("lab order check: ok=%v err=%v\n%s", ok, err, b.String())
	}
}

func TestWriteDups(t *testing.T) {
	var b bytes.Buffer
	if err := WriteDups(&b, []string{"a", "b c", "x\ny"}); err != nil {
		t.Fatal(err)
	}
	if want := "a\nb c\n\"x\\ny\"\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	d, l := setup(t)
	consumeLab(t, d, l)
	ids, err := l.Messages().Duplicates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := WriteDups(&b, ids); err != nil {
		t.Fatal(err)
	}
	if want := "EAI-20240611-000102\nEAI-20240611-000104\nEAI-20240611-000111\n"; b.String() != want {
		t.Errorf("lab dups:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestStatus(t *testing.T) {
	d, l := setup(t)
	consumeLab(t, d, l)
	put(t, d, queue.Inbox, "new.json", `{}`)
	put(t, d, queue.Inbox, "old.json", `{}`)
	put(t, d, queue.Inbox, "ignored.tmp", `{}`)
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(filepath.Join(d.StagePath(queue.Inbox), "old.json"), old, old); err != nil {
		t.Fatal(err)
	}
	r, err := Status(context.Background(), d, l)
	if err != nil {
		t.Fatal(err)
	}
	if r.Inbox != 2 || r.Processing != 0 || r.Done != 18 || r.Error != 2 {
		t.Errorf("counts inbox=%d processing=%d done=%d error=%d, want 2 0 18 2", r.Inbox, r.Processing, r.Done, r.Error)
	}
	if age, ok := r.OldestAge(); !ok || age < 2*time.Hour || age > 2*time.Hour+time.Minute {
		t.Errorf("oldest age %v (%v), want about 2h", age, ok)
	}
	want := ledger.Stats{Processed: 15, Duplicates: 3, DeadLetters: 2,
		DeadLettersByReason: map[spool.Reason]int64{spool.ReasonParse: 1, spool.ReasonMissingField: 1}}
	if r.Ledger.Processed != want.Processed || r.Ledger.Duplicates != want.Duplicates ||
		r.Ledger.DeadLetters != want.DeadLetters || len(r.Ledger.DeadLettersByReason) != 2 ||
		r.Ledger.DeadLettersByReason[spool.ReasonParse] != 1 || r.Ledger.DeadLettersByReason[spool.ReasonMissingField] != 1 {
		t.Errorf("ledger stats %+v, want %+v", r.Ledger, want)
	}
}

func TestWriteStatus(t *testing.T) {
	now := time.Date(2024, 6, 11, 12, 0, 0, 0, time.UTC)
	r := StatusReport{
		Path: "/var/spool/orders", Inbox: 1200, Processing: 3, Done: 98765, Error: 4,
		Oldest: now.Add(-3*time.Minute - 7*time.Second), Now: now, Retries: 2, NextRetry: now.Add(5 * time.Minute),
		Ledger: ledger.Stats{Processed: 90000, Duplicates: 8765, DeadLetters: 4,
			DeadLettersByReason: map[spool.Reason]int64{spool.ReasonParse: 1, spool.ReasonMissingField: 3}},
	}
	var b bytes.Buffer
	if err := WriteStatus(&b, r); err != nil {
		t.Fatal(err)
	}
	want := `queue              /var/spool/orders
inbox              1200  (oldest waiting 3m07s)
processing         3
done               98765
error              4 dead letters now
retries            2 waiting, the next due in 5m00s (spool flush makes them due)
ledger             90000 processed, 8765 duplicates, 4 dead letters ever
dead letters ever  missing-field  3
                   parse          1
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	r.Inbox, r.Oldest, r.Ledger, r.Retries = 0, time.Time{}, ledger.Stats{}, 0
	b.Reset()
	if err := WriteStatus(&b, r); err != nil {
		t.Fatal(err)
	}
	want = `queue       /var/spool/orders
inbox       0
processing  3
done        98765
error       4 dead letters now
ledger      0 processed, 0 duplicates, 0 dead letters ever
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestAge(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {1499 * time.Millisecond, "1s"}, {59 * time.Second, "59s"}, {187 * time.Second, "3m07s"},
		{5*time.Hour + 2*time.Minute + 30*time.Second, "5h02m"}, {51 * time.Hour, "2d03h"},
	} {
		if got := Age(tt.d); got != tt.want {
			t.Errorf("Age(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
