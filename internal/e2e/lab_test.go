//go:build linux

package e2e

import (
	"database/sql"
	"encoding/csv"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// labFixture is a queue of the lab's shape: 15 distinct valid messages in
// three orders with gap-free sequences, 3 redeliveries of them under other
// names, one unparseable file and one without amount.
func labFixture() map[string]string {
	fx := map[string]string{}
	amounts := []string{"100", "25.5", "-12.50", "0.01", "12345678901234567.89"}
	n := 0
	for _, order := range []string{"ORD-A", "ORD-B", "ORD-C"} {
		for seq := 1; seq <= 5; seq++ {
			n++
			extra := `,"customer":"ACME","currency":"EUR"`
			switch n % 5 {
			case 1:
				extra += `,"express":true`
			case 2:
				extra += `,"lines":[{"sku":"X-1","qty":2}]`
			case 3:
				extra += `,"meta":{"source":"edi"}`
			}
			fx[fmt.Sprintf("msg_%03d.json", n)] = fmt.Sprintf(
				`{"msg_id":"MSG-%03d","order_no":%q,"seq":%d,"amount":%s%s}`, n, order, seq, amounts[(n-1)%len(amounts)], extra)
		}
	}
	// Redeliveries: the same content under another name.
	fx["msg_012_retry.json"] = fx["msg_012.json"]
	fx["msg_003_retry.json"] = fx["msg_003.json"]
	fx["msg_007_resent.json"] = fx["msg_007.json"]
	fx["msg_bad.json"] = `{"msg_id":"MSG-099","order_no":"ORD-A","seq":`
	// Its extra field must not reach the schema: it is not a valid message.
	fx["msg_noamount.json"] = `{"msg_id":"MSG-098","order_no":"ORD-C","seq":6,"coupon":"X"}`
	return fx
}

// TestLabFlow runs the lab's whole flow through the command contract:
// init, schema, consume, dups, errors, order-check, lag and replay.
func TestLabFlow(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	src := filepath.Join(base, "fixture")
	q := filepath.Join(base, "q")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	fx := labFixture()
	for name, data := range fx {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Not *.json: init --from must not copy it.
	if err := os.WriteFile(filepath.Join(src, "README.txt"), []byte("fixture"), 0o644); err != nil {
		t.Fatal(err)
	}

	// init: four stages, the 20 messages copied exactly.
	mustRun(t, 0, "init", q, "--from", src)
	for _, s := range []string{inbox, processing, done, errorStage} {
		if fi, err := os.Stat(filepath.Join(q, s)); err != nil || !fi.IsDir() {
			t.Fatalf("init: %s/ missing: %v", s, err)
		}
	}
	checkInbox := func(when string) {
		t.Helper()
		got := map[string]string{}
		for _, f := range entries(t, q, inbox) {
			b, err := os.ReadFile(filepath.Join(q, inbox, f.Name))
			if err != nil {
				t.Fatal(err)
			}
			got[f.Name] = string(b)
		}
		if len(got) != 20 || !maps.Equal(got, fx) {
			var names []string
			for n := range got {
				names = append(names, n)
			}
			slices.Sort(names)
			t.Fatalf("%s: inbox/ holds %d entries %q, want the fixture's 20 files, byte for byte", when, len(got), names)
		}
	}
	checkInbox("init --from")
	// init is idempotent; without --from it copies nothing.
	mustRun(t, 0, "init", q)
	checkInbox("second init")

	// lag: exit 1 only when inbox exceeds the threshold.
	for _, c := range []struct {
		threshold string
		code      int
	}{{"0", 1}, {"19", 1}, {"20", 0}, {"100", 0}} {
		r := mustRun(t, c.code, "lag", q, c.threshold)
		if want := "inbox=20 processing=0 error=0\n"; r.stdout != want {
			t.Errorf("lag %s: got %q, want %q", c.threshold, r.stdout, want)
		}
	}

	// schema: every field of the valid messages, with type and role.
	r := mustRun(t, 0, "schema", q)
	wantSchema := []string{
		"amount,number,",
		"currency,string,",
		"customer,string,",
		"express,boolean,",
		"lines,array,",
		"meta,object,",
		"msg_id,string,idempotency-key",
		"order_no,string,order-key",
		"seq,integer,sequence",
	}
	checkCSV(t, "schema", r.stdout, "field,type,role", wantSchema)
	out := filepath.Join(base, "schema.csv")
	mustRun(t, 0, "schema", q, "-o", out)
	if b, err := os.ReadFile(out); err != nil || string(b) != r.stdout {
		t.Errorf("schema -o: file holds %q (%v), stdout was %q", b, err, r.stdout)
	}
	checkInbox("schema") // schema only reads

	// consume.
	r = mustRun(t, 0, "consume", q)
	if got, want := parseStats(t, r), (consumeStats{Processed: 15, Duplicates: 3, DeadLetters: 2}); got != want {
		t.Errorf("consume: %+v, want %+v", got, want)
	}
	if n := len(entries(t, q, done)); n != 18 {
		t.Errorf("done/ holds %d, want 18", n)
	}
	if n := len(entries(t, q, errorStage)); n != 2 {
		t.Errorf("error/ holds %d, want 2", n)
	}
	if n := len(entries(t, q, inbox)); n != 0 {
		t.Errorf("inbox/ holds %d, want 0", n)
	}
	requireEmpty(t, q, processing)

	db := openLedger(t, q)
	rows := processedRows(t, db)
	if len(rows) != 15 {
		t.Errorf("processed holds %d rows, want 15", len(rows))
	}
	for id, amount := range map[string]string{"MSG-005": "12345678901234567.89", "MSG-003": "-12.50", "MSG-001": "100", "MSG-004": "0.01"} {
		if got := rows[id].Amount; got != amount {
			t.Errorf("processed amount of %s = %q, want %q exactly as sent", id, got, amount)
		}
	}
	// The amount column holds text: a REAL or NUMERIC value would round.
	var typ, amount string
	if err := db.QueryRow(`SELECT typeof(amount), amount FROM processed WHERE msg_id = 'MSG-015'`).Scan(&typ, &amount); err != nil {
		t.Fatal(err)
	}
	if typ != "text" || amount != "12345678901234567.89" {
		t.Errorf("MSG-015 amount is %s %q, want text %q", typ, amount, "12345678901234567.89")
	}

	r = mustRun(t, 0, "dups", q)
	if want := "MSG-003\nMSG-007\nMSG-012\n"; r.stdout != want {
		t.Errorf("dups: got %q, want %q", r.stdout, want)
	}
	dupsFile := filepath.Join(base, "dup.txt")
	mustRun(t, 0, "dups", q, "-o", dupsFile)
	if b, _ := os.ReadFile(dupsFile); string(b) != r.stdout {
		t.Errorf("dups -o: file holds %q, stdout was %q", b, r.stdout)
	}

	r = mustRun(t, 0, "errors", q)
	checkCSV(t, "errors", r.stdout, "file,reason", []string{"msg_bad.json,parse", "msg_noamount.json,missing-field"})

	r = mustRun(t, 0, "order-check", q)
	if r.stdout != "OK\n" {
		t.Errorf("order-check: got %q, want %q", r.stdout, "OK\n")
	}
	r = mustRun(t, 0, "order-check", q, "--sql")
	if !strings.Contains(strings.ToUpper(r.stdout), "SELECT") {
		t.Errorf("order-check --sql: want the query, got %q", r.stdout)
	}

	for _, c := range []struct {
		threshold string
		code      int
	}{{"0", 0}, {"100", 0}} {
		r := mustRun(t, c.code, "lag", q, c.threshold)
		if want := "inbox=0 processing=0 error=2\n"; r.stdout != want {
			t.Errorf("lag %s after consume: got %q, want %q", c.threshold, r.stdout, want)
		}
	}
	for _, args := range [][]string{{"lag", q}, {"lag", q, "ten"}, {"lag", q, "-1"}, {"no-such-command", q}} {
		r := run(t, args...)
		if r.code != 2 || strings.TrimSpace(r.stderr) == "" {
			t.Errorf("bad usage: want exit 2 and a message on stderr, got\n%s", r)
		}
	}

	// replay refusals change nothing, neither the stages nor the ledger.
	ledgerCounts := func() [3]int {
		return [3]int{
			count(t, db, `SELECT COUNT(*) FROM replays`),
			count(t, db, `SELECT COUNT(*) FROM deliveries`),
			count(t, db, `SELECT COUNT(*) FROM processed`),
		}
	}
	for _, c := range []struct {
		code  int
		files []string
	}{
		{1, []string{"nope.json"}},
		{1, []string{"msg_noamount.json", "nope.json"}},
		{1, []string{"nope.json", "msg_noamount.json"}},
		{1, []string{"msg_001.json"}}, // in done/, not error/
		{1, []string{"msg_bad.json", "msg_001.json"}},
		{2, []string{"../done/msg_001.json"}},
		{2, []string{"msg_bad.json", "../x.json"}},
		{2, []string{"error/msg_bad.json"}},
		{2, []string{".."}},
		{2, []string{filepath.Join(q, errorStage, "msg_bad.json")}},
		{2, nil},
	} {
		snap, counts := snapshot(t, q), ledgerCounts()
		r := run(t, append([]string{"replay", q}, c.files...)...)
		if r.code != c.code {
			t.Errorf("replay %q: want exit %d, got\n%s", c.files, c.code, r)
		}
		if c.files != nil && len(lines(r.stderr)) != 1 {
			t.Errorf("replay %q: want one line on stderr, got %q", c.files, r.stderr)
		}
		if d := diffSnapshots(snap, snapshot(t, q)); len(d) > 0 {
			t.Errorf("replay %q refused, yet changed the queue: %s", c.files, strings.Join(d, "; "))
		}
		if got := ledgerCounts(); got != counts {
			t.Errorf("replay %q refused, yet changed the ledger (replays, deliveries, processed): %v -> %v", c.files, counts, got)
		}
	}

	// A replay moves the dead letter back, the same file, and records it.
	before := statFile(t, filepath.Join(q, errorStage, "msg_noamount.json"))
	mustRun(t, 0, "replay", q, "msg_noamount.json")
	after := statFile(t, filepath.Join(q, inbox, "msg_noamount.json"))
	if after.Ino != before.Ino || after.Content != before.Content {
		t.Errorf("replayed file changed: %+v -> %+v", before, after)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM replays WHERE file = 'msg_noamount.json'`); n != 1 {
		t.Errorf("replays holds %d rows for msg_noamount.json, want 1", n)
	}
	r = mustRun(t, 1, "lag", q, "0")
	if want := "inbox=1 processing=0 error=1\n"; r.stdout != want {
		t.Errorf("lag after replay: got %q, want %q", r.stdout, want)
	}
	// Still poison: consumed again, dead-lettered again, with a second
	// record; nothing else changes.
	r = mustRun(t, 0, "consume", q)
	if got, want := parseStats(t, r), (consumeStats{DeadLetters: 1}); got != want {
		t.Errorf("consume after replay: %+v, want %+v", got, want)
	}
	r = mustRun(t, 0, "errors", q)
	checkCSV(t, "errors after replay", r.stdout, "file,reason", []string{"msg_bad.json,parse", "msg_noamount.json,missing-field"})
	if n := count(t, db, `SELECT COUNT(*) FROM deliveries WHERE ino = ? AND outcome = 'dead-letter' AND reason = 'missing-field'`, before.Ino); n != 2 {
		t.Errorf("the replayed file has %d dead-letter records, want 2", n)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM processed`); n != 15 {
		t.Errorf("processed holds %d rows after the replay, want 15", n)
	}
	requireEmpty(t, q, processing)
	if r := mustRun(t, 0, "status", q); strings.TrimSpace(r.stdout) == "" {
		t.Errorf("status printed nothing")
	}
}

// checkCSV checks CSV output: the header line exactly, then the rows in any
// order.
func checkCSV(t *testing.T, what, out, header string, want []string) {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Errorf("%s: not CSV: %v\n%s", what, err, out)
		return
	}
	if first, _, _ := strings.Cut(out, "\n"); first != header {
		t.Errorf("%s: first line %q, want %q", what, first, header)
	}
	var got []string
	for _, rec := range recs[min(1, len(recs)):] {
		got = append(got, strings.Join(rec, ","))
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s: rows\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestOrderCheckProblems checks order-check's report of a duplicate seq and
// of gaps, one row per run of missing seqs, and its exit status 1.
func TestOrderCheckProblems(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	src, q := filepath.Join(base, "src"), filepath.Join(base, "q")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, m := range []struct {
		order string
		seq   int
	}{{"X", 1}, {"X", 2}, {"X", 2}, {"X", 5}, {"Y", 2}, {"Y", 3}, {"Z", 1}, {"Z", 3}} {
		data := fmt.Sprintf(`{"msg_id":"id-%d","order_no":%q,"seq":%d,"amount":1}`, i, m.order, m.seq)
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("m%d.json", i)), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, 0, "init", q, "--from", src)
	mustRun(t, 0, "consume", q)
	r := mustRun(t, 1, "order-check", q)
	checkCSV(t, "order-check", r.stdout, "order_no,seq,problem", []string{
		"X,2,duplicate",
		"X,3-4,missing",
		"Y,1,missing",
		"Z,2,missing",
	})
}

// TestLedgerFlag keeps the ledger outside the queue with --db, given before
// or after the queue directory: every command must use that ledger, and
// none may create one inside the queue.
func TestLedgerFlag(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	src, q, db := filepath.Join(base, "src"), filepath.Join(base, "q"), filepath.Join(base, "elsewhere", "spool.db")
	for _, d := range []string{src, filepath.Dir(db)} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range labFixture() {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, 0, "init", q, "--from", src, "--db", db)
	r := mustRun(t, 0, "consume", "--db", db, q, "--batch", "4")
	if got, want := parseStats(t, r), (consumeStats{Processed: 15, Duplicates: 3, DeadLetters: 2}); got != want {
		t.Errorf("consume --db: %+v, want %+v", got, want)
	}
	for _, args := range [][]string{{"dups", q, "--db", db}, {"dups", "--db", db, q}} {
		if r := mustRun(t, 0, args...); r.stdout != "MSG-003\nMSG-007\nMSG-012\n" {
			t.Errorf("%q: got %q", args, r.stdout)
		}
	}
	r = mustRun(t, 0, "errors", q, "--db", db)
	checkCSV(t, "errors --db", r.stdout, "file,reason", []string{"msg_bad.json,parse", "msg_noamount.json,missing-field"})
	if _, err := os.Lstat(filepath.Join(q, "ledger.db")); err == nil {
		t.Errorf("a ledger was created inside the queue although --db points elsewhere")
	}
	sdb, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	if n := count(t, sdb, `SELECT COUNT(*) FROM processed`); n != 15 {
		t.Errorf("the --db ledger's processed holds %d rows, want 15", n)
	}
}
