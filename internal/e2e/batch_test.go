//go:build linux

package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
)

// Batch files (docs/DESIGN.md, "Batch files: the consumer"): a queue whose
// spool.conf sets a format consumes each record of a file as a message of
// its own, through the real binary.

// batchQueue makes a queue whose spool.conf is conf.
func batchQueue(t *testing.T, conf string) string {
	t.Helper()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	if err := os.WriteFile(filepath.Join(q, "spool.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return q
}

// putBytes puts a file into inbox/ as a producer must: under a hidden
// name, then renamed in.
func putBytes(t *testing.T, q, name string, data []byte) {
	t.Helper()
	tmp := filepath.Join(q, inbox, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(q, inbox, name)); err != nil {
		t.Fatal(err)
	}
}

// gzipped is data compressed with gzip.
func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// stageNames lists the names of a stage, sorted.
func stageNames(t *testing.T, q, stage string) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(q, stage))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	slices.Sort(names)
	return names
}

// ordersCSV writes n rows of orders, the rows whose 1-based number bad
// says with a column missing; it returns the file and the lines of the
// bad rows (the header is line 1).
func ordersCSV(n int, bad func(i int) bool) ([]byte, []int) {
	var b bytes.Buffer
	b.WriteString("msg_id,order_no,seq,amount\n")
	var lines []int
	for i := 1; i <= n; i++ {
		if bad(i) {
			fmt.Fprintf(&b, "m%d,o%d,%d\n", i, i%37, i)
			lines = append(lines, i+1)
			continue
		}
		fmt.Fprintf(&b, "m%d,o%d,%d,%d.%02d\n", i, i%37, i, i, i%100)
	}
	return b.Bytes(), lines
}

// requireOrdersDone fails unless q's error/ holds exactly the one-record
// dead letters of orders.csv's bad lines (orders~L<line>.csv) and done/
// the file; it returns the dead letters' names, sorted.
func requireOrdersDone(t *testing.T, q string, badLines []int) []string {
	t.Helper()
	var want []string
	for _, l := range badLines {
		want = append(want, fmt.Sprintf("orders~L%d.csv", l))
	}
	slices.Sort(want)
	if got := stageNames(t, q, errorStage); !slices.Equal(got, want) {
		t.Fatalf("error/ holds %q, want %q", got, want)
	}
	if got := stageNames(t, q, done); !slices.Equal(got, []string{"orders.csv"}) {
		t.Fatalf("done/ holds %q, want the batch file", got)
	}
	return want
}

// checkFsck runs spool fsck on q (with its --db args) and fails unless
// it finds nothing wrong.
func checkFsck(t *testing.T, q string, args ...string) {
	t.Helper()
	spoolAt{bin: spoolBin}.checkFsck(t, q, args...)
}

// checkFsck is checkFsck run by s's binary: the plain build for a long
// run's ledger of a million records, which the race-instrumented one
// checks in minutes.
func (s spoolAt) checkFsck(t *testing.T, q string, args ...string) {
	t.Helper()
	if r := s.run(t, append([]string{"fsck", q}, args...)...); r.code != 0 || !strings.Contains(r.stdout, ": ok") {
		t.Fatalf("fsck is not clean:\n%s", r)
	}
}

// TestBatchCSV: a CSV of 2 000 rows (SPOOL_TEST_LONG=1: 200 000, run by
// the plain build) with 10 of the wrong column count gives the other rows
// processed and 10 one-record dead letters named after their lines, the
// file in done/; sent again, it is all duplicates (and the same bad rows
// again); a bad row fixed and replayed is processed.
func TestBatchCSV(t *testing.T) {
	t.Parallel()
	rows, sp := 2000, spoolAt{bin: spoolBin}
	if testenv.IsLong() {
		rows, sp = 200_000, longSpool(t)
	}
	q := batchQueue(t, `{"format": "csv"}`)
	data, badLines := ordersCSV(rows, func(i int) bool { return i%(rows/10) == 17 })
	good := rows - len(badLines)
	putBytes(t, q, "orders.csv", data)
	st := parseStats(t, sp.mustRun(t, 0, "consume", q))
	if len(badLines) != 10 || st != (consumeStats{Processed: good, DeadLetters: 10}) {
		t.Fatalf("first run: %+v, want %d processed and 10 dead letters (of %d bad rows)", st, good, len(badLines))
	}
	want := requireOrdersDone(t, q, badLines)
	if got := stageNames(t, q, inbox); len(got) != 0 {
		t.Fatalf("inbox/ holds %q", got)
	}
	// A dead letter is the header and the row, as in the file.
	dl, err := os.ReadFile(filepath.Join(q, errorStage, want[0]))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(dl, []byte("msg_id,order_no,seq,amount\n")) || bytes.Count(dl, []byte("\n")) != 2 {
		t.Fatalf("dead letter %s is %q, want the header and one row", want[0], dl)
	}
	db := filepath.Join(q, "ledger.db")
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM processed`); n != good {
		t.Fatalf("%d processed rows, want %d", n, good)
	}
	// The origin of each record is in the ledger, and spool show shows it.
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM processed WHERE msg_id = 'm5' AND file = 'orders.csv#L6' AND seq = 5 AND amount = '5.05'`); n != 1 {
		t.Fatalf("m5's row does not name orders.csv#L6 with seq 5 and amount 5.05")
	}
	if r := mustRun(t, 0, "show", q, "m5"); !strings.Contains(r.stdout, "orders.csv#L6") {
		t.Fatalf("spool show does not name the record's origin:\n%s", r)
	}
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter' AND reason = 'parse' AND file = ? AND detail LIKE ?`,
		want[0], "%line "+strings.TrimSuffix(strings.TrimPrefix(want[0], "orders~L"), ".csv")+":%"); n != 1 {
		t.Fatalf("no dead-letter row for %s with reason parse and its line in the detail", want[0])
	}
	sp.checkFsck(t, q)

	// The same file again: a file of duplicates. spool status shows what
	// became of each file's records, the latest first.
	putBytes(t, q, "orders.csv", data)
	st = parseStats(t, sp.mustRun(t, 0, "consume", q))
	if st != (consumeStats{Duplicates: good, DeadLetters: 10}) {
		t.Fatalf("second run: %+v, want %d duplicates and 10 dead letters", st, good)
	}
	wantFiles := []batchFileCounts{{"orders.csv", 0, good, 10}, {"orders.csv", good, 0, 10}}
	if got := statusBatchFiles(t, sp, q); !slices.Equal(got, wantFiles) {
		t.Fatalf("spool status shows batch files %+v, want %+v", got, wantFiles)
	}
	if out := sp.mustRun(t, 0, "status", q).stdout; !strings.Contains(out, fmt.Sprintf("orders.csv: %d processed, 0 duplicates, 10 dead letters", good)) {
		t.Fatalf("spool status does not show the first file's records:\n%s", out)
	}
	// And the console's overview.
	tokens := tokenFile(t, t.TempDir(), "tokens", tokenLine("vic", "viewer", "vic-token"))
	_, base := startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--auth", tokens)
	code, body := apiCall(t, base, "vic-token", "GET", "/api/v1/overview", "")
	var ov struct {
		BatchFiles []struct {
			File                               string
			Processed, Duplicates, DeadLetters int
		} `json:"batch_files"`
	}
	if err := json.Unmarshal([]byte(body), &ov); code != 200 || err != nil || len(ov.BatchFiles) != 2 ||
		ov.BatchFiles[1].File != "orders.csv" || ov.BatchFiles[1].Processed != good || ov.BatchFiles[0].Duplicates != good {
		t.Fatalf("GET overview: %d %v, batch files %+v\n%s", code, err, ov.BatchFiles, body)
	}
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM processed`); n != good {
		t.Fatalf("%d processed rows after the redelivery, want %d", n, good)
	}
	if got := len(stageNames(t, q, errorStage)); got != 20 {
		t.Fatalf("error/ holds %d files, want 20", got)
	}
	checkFsck(t, q)

	// Each bad row of the first run fixed in an editor, and all replayed
	// at once: a dead letter is a batch file of one record.
	for _, name := range want {
		path := filepath.Join(q, errorStage, name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		fixed := append(bytes.TrimSuffix(b, []byte("\n")), ",9.99\n"...)
		if err := os.WriteFile(path, fixed, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sp.mustRun(t, 0, append([]string{"replay", q}, want...)...)
	st = parseStats(t, sp.mustRun(t, 0, "consume", q))
	if st != (consumeStats{Processed: 10}) {
		t.Fatalf("after the replay: %+v, want the 10 fixed rows processed", st)
	}
	for _, name := range want {
		line, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, "orders~L"), ".csv"))
		id := "m" + strconv.Itoa(line-1)
		if n := queryLedger(t, db, `SELECT COUNT(*) FROM processed WHERE msg_id = ? AND amount = '9.99'`, id); n != 1 {
			t.Fatalf("the fixed row %s (%s) was not processed", id, name)
		}
	}
	checkFsck(t, q)
}

// TestBatchJSONLTruncated: a JSON Lines file whose last line was cut short
// has its other lines processed, and the cut line dead-lettered alone.
func TestBatchJSONLTruncated(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "jsonl"}`)
	var b bytes.Buffer
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, `{"msg_id":"j%d","order_no":"o","seq":%d,"amount":"1.00"}`+"\n", i, i)
	}
	b.WriteString(`{"msg_id":"j101","order_no":"o","se`)
	putBytes(t, q, "feed.jsonl", b.Bytes())
	st := parseStats(t, mustRun(t, 0, "consume", q))
	if st != (consumeStats{Processed: 100, DeadLetters: 1}) {
		t.Fatalf("%+v, want 100 processed and 1 dead letter", st)
	}
	if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"feed~L101.jsonl"}) {
		t.Fatalf("error/ holds %q, want feed~L101.jsonl", got)
	}
	if got := stageNames(t, q, done); !slices.Equal(got, []string{"feed.jsonl"}) {
		t.Fatalf("done/ holds %q", got)
	}
	checkFsck(t, q)
	// The cut line completed in an editor and replayed.
	if err := os.WriteFile(filepath.Join(q, errorStage, "feed~L101.jsonl"), []byte(`{"msg_id":"j101","order_no":"o","seq":101,"amount":"1.00"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, "replay", q, "feed~L101.jsonl")
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st != (consumeStats{Processed: 1}) {
		t.Fatalf("the completed line, replayed: %+v, want 1 processed", st)
	}
	// spool enqueue takes the names the format includes, and those only.
	src := filepath.Join(t.TempDir(), "more.jsonl")
	if err := os.WriteFile(src, []byte(`{"msg_id":"j200","order_no":"o","seq":1,"amount":"1.00"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, "enqueue", q, src)
	txt := filepath.Join(t.TempDir(), "more.txt")
	if err := os.WriteFile(txt, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, 2, "enqueue", q, txt); !strings.Contains(r.stderr, "not a name the queue's format includes") {
		t.Fatalf("enqueue of a name the format does not include:\n%s", r)
	}
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st != (consumeStats{Processed: 1}) {
		t.Fatalf("the enqueued file: %+v, want 1 processed", st)
	}
}

// TestBatchGzipCSV: a gzipped CSV is read through gzip; its rows'
// seq, text in a CSV, is checked as the number it spells.
func TestBatchGzipCSV(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv", "include": ["*.csv", "*.csv.gz"]}`)
	data, _ := ordersCSV(500, func(int) bool { return false })
	data = append(data, "z1,o,0,1.00\n"...) // seq 0: refused as ever
	putBytes(t, q, "orders.csv.gz", gzipped(t, data))
	st := parseStats(t, mustRun(t, 0, "consume", q))
	if st != (consumeStats{Processed: 500, DeadLetters: 1}) {
		t.Fatalf("%+v, want 500 processed and the seq 0 row dead-lettered", st)
	}
	db := filepath.Join(q, "ledger.db")
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM processed WHERE seq = 250 AND msg_id = 'm250'`); n != 1 {
		t.Fatal("m250's seq was not kept as the number 250")
	}
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter' AND reason = 'invalid-field' AND field = 'seq' AND file = 'orders~L502.csv'`); n != 1 {
		t.Fatal("the seq 0 row was not dead-lettered as invalid-field seq, in orders~L502.csv")
	}
	if got := stageNames(t, q, done); !slices.Equal(got, []string{"orders.csv.gz"}) {
		t.Fatalf("done/ holds %q", got)
	}
	checkFsck(t, q)
}

// TestBatchNoRecordProcessed: batch files of which no record is
// processed (empty, a header alone, every row a dead letter) go to done/
// as the others do, and the ledger knows them: spool status lists each,
// and spool fsck finds done/ clean, with a handler (--exec) as without.
func TestBatchNoRecordProcessed(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"--exec", "exit 64"}} {
		q := batchQueue(t, `{"format": "csv"}`)
		files := map[string]string{
			"empty.csv":  "",
			"header.csv": "msg_id,order_no,seq,amount\n",
			"allbad.csv": "msg_id,order_no,seq,amount\nz1,o,x,1\nz2,o,0,1\n",
		}
		for name, data := range files {
			putBytes(t, q, name, []byte(data))
		}
		st := parseStats(t, mustRun(t, 0, append([]string{"consume", q}, args...)...))
		if st != (consumeStats{DeadLetters: 2}) {
			t.Fatalf("%v: %+v, want the 2 bad rows dead-lettered and nothing else", args, st)
		}
		if got := stageNames(t, q, done); !slices.Equal(got, []string{"allbad.csv", "empty.csv", "header.csv"}) {
			t.Fatalf("%v: done/ holds %q, want the three files", args, got)
		}
		status := mustRun(t, 0, "status", q).stdout
		for name := range files {
			if !strings.Contains(status, name+": 0 processed") {
				t.Errorf("%v: spool status does not list %s:\n%s", args, name, status)
			}
		}
		checkFsck(t, q)
	}
}

// TestBatchEncodings: EUC-KR, Shift_JIS and GB18030 files (the last with
// a character outside the BMP, four bytes in GB18030) have their
// characters kept exactly in the ledger, in UTF-8.
func TestBatchEncodings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		label, text string
		encode      func(string) ([]byte, error)
	}{
		{"euc-kr", "서울 주문", func(s string) ([]byte, error) { return korean.EUCKR.NewEncoder().Bytes([]byte(s)) }},
		{"shift_jis", "東京の注文", func(s string) ([]byte, error) { return japanese.ShiftJIS.NewEncoder().Bytes([]byte(s)) }},
		{"gb18030", "北京订单 𠀀", func(s string) ([]byte, error) { return simplifiedchinese.GB18030.NewEncoder().Bytes([]byte(s)) }},
	}
	for _, tc := range cases {
		t.Run(tc.label, func(t *testing.T) {
			q := batchQueue(t, `{"format": "csv", "encoding": "`+tc.label+`"}`)
			raw, err := tc.encode("msg_id,order_no,seq,amount,note\ne1,o1,1,3.50," + tc.text + "\n")
			if err != nil {
				t.Fatal(err)
			}
			putBytes(t, q, "local.csv", raw)
			st := parseStats(t, mustRun(t, 0, "consume", q))
			if st != (consumeStats{Processed: 1}) {
				t.Fatalf("%+v, want 1 processed", st)
			}
			db := filepath.Join(q, "ledger.db")
			want := `"note":"` + tc.text + `"`
			if n := queryLedger(t, db, `SELECT COUNT(*) FROM processed WHERE msg_id = 'e1' AND instr(payload, ?) > 0`, want); n != 1 {
				t.Fatalf("the payload does not hold %s", want)
			}
		})
	}
}

// TestBatchDoneFile: with a done-file pattern, a data file waits in inbox/
// until its done-file is there; then both go to done/.
func TestBatchDoneFile(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv", "done_file": "{name}.done"}`)
	data, _ := ordersCSV(20, func(int) bool { return false })
	putBytes(t, q, "orders.csv", data)
	st := parseStats(t, mustRun(t, 0, "consume", q))
	if st != (consumeStats{}) {
		t.Fatalf("without its done-file: %+v, want nothing consumed", st)
	}
	if got := stageNames(t, q, inbox); !slices.Equal(got, []string{"orders.csv"}) {
		t.Fatalf("inbox/ holds %q, want the waiting data file", got)
	}
	// status says the file waits, apart from the messages of inbox/, and
	// names a done-file whose data file never came (its producer wrote
	// ORDERS.CSV), and a gzipped file the queue's include does not take.
	putBytes(t, q, "ORDERS.CSV.done", nil)
	putBytes(t, q, "more.csv.gz", nil)
	waiting := func(want int) {
		t.Helper()
		text := mustRun(t, 0, "status", q).stdout
		if said := strings.Contains(text, "1 data file waiting for a done-file"); said != (want == 1) {
			t.Errorf("status, %d waiting: the waiting file said %v:\n%s", want, said, text)
		}
		if !strings.Contains(text, "1 done-file without its data file") {
			t.Errorf("status does not name the done-file without its data file:\n%s", text)
		}
		if !strings.Contains(text, "1 entry the queue never takes, not named as its messages are (*.csv, once {name}.done is there): more.csv.gz\n") {
			t.Errorf("status does not name the file its include does not take:\n%s", text)
		}
		var st struct {
			Stages        map[string]int `json:"stages"`
			Waiting       int            `json:"waiting_for_done_file"`
			Oldest        *time.Time     `json:"oldest_waiting_for_done_file_mtime"`
			Orphans       int            `json:"done_files_without_data"`
			NotTaken      int            `json:"inbox_not_taken"`
			NotTakenNames []string       `json:"inbox_not_taken_names"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, 0, "status", q, "--json").stdout), &st); err != nil {
			t.Fatal(err)
		}
		if st.Waiting != want || (st.Oldest != nil) != (want > 0) || st.Stages["inbox"] != 0 || st.Orphans != 1 ||
			st.NotTaken != 1 || !slices.Equal(st.NotTakenNames, []string{"more.csv.gz"}) {
			t.Errorf("status --json: %d waiting (oldest %v), inbox %d, %d done-files without data, not taken %d %q; want %d waiting, inbox 0, 1 without data, more.csv.gz not taken",
				st.Waiting, st.Oldest, st.Stages["inbox"], st.Orphans, st.NotTaken, st.NotTakenNames, want)
		}
	}
	waiting(1)
	// And the console's overview, on the inbox/ stage.
	tokens := tokenFile(t, t.TempDir(), "tokens", tokenLine("vic", "viewer", "vic-token"))
	_, base := startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--auth", tokens)
	var ov struct {
		Stages []struct {
			Stage   string   `json:"stage"`
			Waiting int      `json:"waiting_for_done_file"`
			Oldest  *float64 `json:"oldest_waiting_for_done_file_age_seconds"`
		} `json:"stages"`
	}
	var body string
	waitFor(t, cmdTimeout, "the overview's stages (the first listing)", func() bool {
		var code int
		code, body = apiCall(t, base, "vic-token", "GET", "/api/v1/overview", "")
		return code == 200 && json.Unmarshal([]byte(body), &ov) == nil && len(ov.Stages) > 0
	})
	if ov.Stages[0].Stage != "inbox" || ov.Stages[0].Waiting != 1 || ov.Stages[0].Oldest == nil {
		t.Fatalf("GET overview: want inbox/ with 1 file waiting for its done-file\n%s", body)
	}
	putBytes(t, q, "orders.csv.done", nil)
	r := mustRun(t, 0, "consume", q)
	st = parseStats(t, r)
	if st != (consumeStats{Processed: 20}) {
		t.Fatalf("with its done-file: %+v, want 20 processed", st)
	}
	if !strings.Contains(r.stderr, `level=WARN msg="inbox/ holds entries the queue never takes, not named as its messages are (*.csv, once {name}.done is there)" entries=1 first=[more.csv.gz]`) {
		t.Errorf("the drain does not warn of the file its include does not take:\n%s", r.stderr)
	}
	if got := stageNames(t, q, done); !slices.Equal(got, []string{"orders.csv", "orders.csv.done"}) {
		t.Fatalf("done/ holds %q, want the data file and its done-file", got)
	}
	if got := stageNames(t, q, inbox); !slices.Equal(got, []string{"ORDERS.CSV.done", "more.csv.gz"}) {
		t.Fatalf("inbox/ holds %q, want the done-file without data and the file not taken alone", got)
	}
	waiting(0)
	checkFsck(t, q)
}

// TestBatchDoneFileRecovery: a consumer killed while it consumed an
// announced file left the file and its done-file claimed in its session,
// and its producer has meanwhile written the next file of the same name,
// not yet announced. The next consumer finishes the old file (under a new
// name, announced again) and leaves the new one waiting for its own
// done-file: the old done-file, put back, would have announced it
// half-written. Then a kill between finish's two moves: the done-file in
// done/, the data file still claimed.
func TestBatchDoneFileRecovery(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv", "done_file": "{name}.done"}`)
	mustRun(t, 0, "consume", q) // makes the ledger's tables
	old, _ := ordersCSV(20, func(int) bool { return false })
	next := []byte("msg_id,order_no,seq,amount\nn1,o1,1,1.00\n")
	dead := func() string {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "localhost"
		}
		s := filepath.Join(q, "processing", fmt.Sprintf("0badc0ffee00-999999@%s", strings.NewReplacer("/", "_", "@", "_").Replace(host)))
		if err := os.Mkdir(s, 0o755); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := dead()
	for name, data := range map[string][]byte{"orders.csv": old, "orders.csv.done": nil} {
		if err := os.WriteFile(filepath.Join(s, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	putBytes(t, q, "orders.csv", next)

	st := parseStats(t, mustRun(t, 0, "consume", q))
	if st != (consumeStats{Processed: 20, Recovered: 2}) {
		t.Fatalf("%+v, want the old file's 20 records processed and its two claims recovered", st)
	}
	if got := stageNames(t, q, inbox); !slices.Equal(got, []string{"orders.csv"}) {
		t.Fatalf("inbox/ holds %q, want the new file alone, waiting for its done-file", got)
	}
	if n := queryLedger(t, filepath.Join(q, "ledger.db"), `SELECT COUNT(*) FROM processed WHERE msg_id = 'n1'`); n != 0 {
		t.Fatal("the new file was taken before its done-file came")
	}

	// Killed between finish's moves: the done-file finished, the data not.
	s = dead()
	if err := os.Rename(filepath.Join(q, inbox, "orders.csv"), filepath.Join(s, "orders.csv")); err != nil {
		t.Fatal(err)
	}
	putBytes(t, q, "orders.csv.done", nil)
	if err := os.Rename(filepath.Join(q, inbox, "orders.csv.done"), filepath.Join(q, done, "orders.csv.done-of-n1")); err != nil {
		t.Fatal(err)
	}
	st = parseStats(t, mustRun(t, 0, "consume", q))
	if st != (consumeStats{Processed: 1, Recovered: 1}) {
		t.Fatalf("%+v, want the claimed file recovered, announced again and its record processed", st)
	}
	if got := stageNames(t, q, inbox); len(got) != 0 {
		t.Fatalf("inbox/ holds %q, want nothing (no done-file left behind)", got)
	}
	checkFsck(t, q)
}

// TestBatchXML: a malformed record of an XML file is dead-lettered alone,
// as an XML file of one record named after its element; an empty file,
// which is no XML document, is one dead letter, the file itself.
func TestBatchXML(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "xml", "record": "Order"}`)
	var b bytes.Buffer
	b.WriteString("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Orders>\n")
	for i := 1; i <= 30; i++ {
		if i == 7 {
			b.WriteString("  <Order msg_id=\"x7\"><order_no>o&bogus;</order_no><seq>7</seq><amount>1</amount></Order>\n")
			continue
		}
		fmt.Fprintf(&b, "  <Order msg_id=\"x%d\"><order_no>o</order_no><seq>%d</seq><amount>%d.25</amount></Order>\n", i, i, i)
	}
	b.WriteString("</Orders>\n")
	putBytes(t, q, "orders.xml", b.Bytes())
	putBytes(t, q, "empty.xml", nil)
	r := mustRun(t, 0, "consume", q)
	st := parseStats(t, r)
	if st.Processed != 29 || st.DeadLetters != 2 {
		t.Fatalf("%+v, want 29 processed and 2 dead letters\n%s", st, r)
	}
	if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"empty.xml", "orders~E7.xml"}) {
		t.Fatalf("error/ holds %q, want empty.xml and orders~E7.xml", got)
	}
	db := filepath.Join(q, "ledger.db")
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter' AND reason = 'parse' AND file = 'empty.xml' AND detail LIKE '%no root element%'`); n != 1 {
		t.Fatal("empty.xml is not recorded as a parse dead letter without a root element")
	}
	// show tells what became of the file's records, and names its dead
	// letter.
	show := mustRun(t, 0, "show", q, "orders.xml").stdout
	for _, want := range []string{"orders.xml (a batch file)", "now         done/orders.xml",
		"batch file  29 processed, 0 duplicates, 1 dead letter (last commit ", "dead letter orders~E7.xml"} {
		if !strings.Contains(show, want) {
			t.Errorf("show orders.xml lacks %q:\n%s", want, show)
		}
	}
	var story struct {
		MsgID      *string `json:"msg_id"`
		BatchFiles []struct {
			File            string   `json:"file"`
			Processed       int64    `json:"processed"`
			DeadLetters     int64    `json:"dead_letters"`
			DeadLetterFiles []string `json:"dead_letter_files"`
		} `json:"batch_files"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "show", q, "orders.xml", "--json").stdout), &story); err != nil {
		t.Fatal(err)
	}
	if b := story.BatchFiles; story.MsgID != nil || len(b) != 1 || b[0].File != "orders.xml" || b[0].Processed != 29 ||
		b[0].DeadLetters != 1 || !slices.Equal(b[0].DeadLetterFiles, []string{"orders~E7.xml"}) {
		t.Errorf("show --json orders.xml: %+v", story)
	}
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM processed WHERE msg_id = 'x8' AND file = 'orders.xml#E8' AND seq = 8`); n != 1 {
		t.Fatal("x8 is not recorded from orders.xml#E8 with seq 8")
	}
	checkFsck(t, q)
	// The dead letter is an XML file of the one record; the entity that
	// broke it fixed, it is replayed and processed.
	path := filepath.Join(q, errorStage, "orders~E7.xml")
	dl, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(dl, []byte("<Order msg_id=\"x7\">")) || bytes.Count(dl, []byte("<Order ")) != 1 {
		t.Fatalf("the dead letter is not the one record:\n%s", dl)
	}
	if err := os.WriteFile(path, bytes.Replace(dl, []byte("&bogus;"), []byte("&amp;"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, "replay", q, "orders~E7.xml")
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st != (consumeStats{Processed: 1}) {
		t.Fatalf("the fixed record, replayed: %+v, want 1 processed", st)
	}
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM processed WHERE msg_id = 'x7' AND seq = 7`); n != 1 {
		t.Fatal("x7 was not processed after its replay")
	}
}

// TestBatchSQLHandler: a batch file's records run the --sql handler in
// the transaction that records them, each in its savepoint: a record the
// handler refuses is a dead letter of its own, written as a one-record
// file after the commit, and its writes are rolled back; --dedup is
// refused on a batch queue with one line, the window being asked for no
// record.
func TestBatchSQLHandler(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	if err := os.WriteFile(filepath.Join(q, "spool.conf"), []byte(`{"format": "csv"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	prepareLedger(t, q, `CREATE TABLE balances (order_no TEXT PRIMARY KEY, cents INTEGER NOT NULL CHECK (cents >= 0))`)
	sqlFile := writeFile(t, state, "book.sql", `INSERT INTO balances (order_no, cents) VALUES (:order_no, CAST(round(:amount * 100) AS INTEGER))
    ON CONFLICT (order_no) DO UPDATE SET cents = cents + excluded.cents;
`)
	putBytes(t, q, "book.csv", []byte("msg_id,order_no,seq,amount\nA,O1,1,10.00\nB,O1,2,-20.00\nC,O1,3,5.00\n"))
	r := mustRun(t, 0, "consume", q, "--sql", sqlFile)
	if st := parseStats(t, r); st != (consumeStats{Processed: 2, DeadLetters: 1}) {
		t.Fatalf("%+v, want 2 processed and B dead-lettered\n%s", st, r)
	}
	if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"book~L3.csv"}) {
		t.Fatalf("error/ holds %q, want book~L3.csv", got)
	}
	db := filepath.Join(q, "ledger.db")
	if n := queryLedger(t, db, `SELECT cents FROM balances WHERE order_no = 'O1'`); n != 1500 {
		t.Fatalf("O1's balance is %d cents, want 1500: B's write must roll back", n)
	}
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter' AND reason = 'handler' AND file = 'book~L3.csv'`); n != 1 {
		t.Fatal("B's dead letter is not recorded with reason handler")
	}
	checkFsck(t, q)
	putBytes(t, q, "more.csv", []byte("msg_id,order_no,seq,amount\nD,O2,1,1.00\n"))
	r = run(t, "consume", q, "--sql", sqlFile, "--dedup", "redis://127.0.0.1:9/0")
	if r.code == 0 || !strings.Contains(r.stderr, "--dedup") || len(notLogged(r.stderr)) != 1 {
		t.Fatalf("--dedup on a batch queue: want one line refusing it\n%s", r)
	}
	if got := stageNames(t, q, inbox); !slices.Equal(got, []string{"more.csv"}) {
		t.Fatalf("inbox/ holds %q after the refusal, want more.csv untouched", got)
	}
}

// TestBatchTooLarge: a record over the contract's max_size is not held
// in memory, and its dead letter is copied from the file, whole.
func TestBatchTooLarge(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "jsonl", "max_size": 256}`)
	long := `{"msg_id":"big","order_no":"o","seq":2,"amount":"1.00","note":"` + strings.Repeat("x", 600) + `"}` + "\n"
	putBytes(t, q, "feed.jsonl", []byte(`{"msg_id":"a","order_no":"o","seq":1,"amount":"1.00"}`+"\n"+long+`{"msg_id":"c","order_no":"o","seq":3,"amount":"1.00"}`+"\n"))
	st := parseStats(t, mustRun(t, 0, "consume", q))
	if st != (consumeStats{Processed: 2, DeadLetters: 1}) {
		t.Fatalf("%+v, want 2 processed and the long line dead-lettered", st)
	}
	b, err := os.ReadFile(filepath.Join(q, errorStage, "feed~L2.jsonl"))
	if err != nil || string(b) != long {
		t.Fatalf("the long line's dead letter is %d bytes (%v), want the line's %d", len(b), err, len(long))
	}
	if n := queryLedger(t, filepath.Join(q, "ledger.db"), `SELECT COUNT(*) FROM deliveries WHERE reason = 'too-large' AND file = 'feed~L2.jsonl'`); n != 1 {
		t.Fatal("the long line is not recorded as too-large")
	}
	checkFsck(t, q)
}

// TestBatchCheckShowsFormat: spool check and consume's configuration line
// name the queue's format, from spool.conf, beside the contract.
func TestBatchCheckShowsFormat(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv", "encoding": "euc-kr", "done_file": "{name}.ok"}`)
	r := run(t, "check", q)
	want := regexp.MustCompile(`(?m)^  format +csv encoding=euc-kr done_file=\{name\}\.ok +spool\.conf$`)
	if !want.MatchString(r.stdout) {
		t.Errorf("spool check does not name the format:\n%s", r)
	}
	r = mustRun(t, 0, "consume", q)
	if !strings.Contains(r.stderr, `settings.format="csv encoding=euc-kr done_file={name}.ok"`) || !strings.Contains(r.stderr, "from.format=spool.conf") {
		t.Errorf("consume's configuration line does not name the format:\n%s", r.stderr)
	}
}

// TestBatchSchema: spool schema on a queue of CSV files infers from each
// record waiting in inbox/ (a seq of digits an integer, the other values
// text), skips the bad ones, and leaves the files where they are.
func TestBatchSchema(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv"}`)
	putBytes(t, q, "a.csv", []byte("msg_id,order_no,seq,amount,note\nA1,O1,1,10.00,hi\nA2,O1,2,x,\nA3,O2\n"))
	putBytes(t, q, "b.json", []byte(`{"msg_id":"J","order_no":"O","seq":1,"amount":"1","json_only":true}`))
	r := mustRun(t, 0, "schema", q)
	want := "field,type,role\nmsg_id,string,idempotency-key\norder_no,string,order-key\nseq,integer,sequence\namount,number,\nnote,string,\n"
	if r.stdout != want {
		t.Errorf("schema of a CSV queue:\n%s\nwant:\n%s", r.stdout, want)
	}
	if got := stageNames(t, q, inbox); !slices.Equal(got, []string{"a.csv", "b.json"}) {
		t.Errorf("inbox/ after schema: %q", got)
	}
	if strings.Contains(r.stderr, "fits the contract") {
		t.Errorf("schema warned with messages that fit:\n%s", r.stderr)
	}

	// A new user's export, whose fields the contract does not name yet:
	// nothing fits, and schema says why instead of an empty schema alone;
	// with the contract flags that name its fields, it infers them.
	q = batchQueue(t, `{"format": "csv"}`)
	putBytes(t, q, "e.csv", []byte("id,customer,total\n1,a,2.00\n"))
	r = mustRun(t, 0, "schema", q)
	if r.stdout != "field,type,role\n" || !strings.Contains(r.stderr, `no message in inbox/ fits the contract: 1 skipped, the first e.csv: parse: the header (line 1): no column "msg_id"`) {
		t.Errorf("schema of a file the contract does not fit:\n%s", r)
	}
	r = mustRun(t, 0, "schema", q, "--key", "id", "--require", "id", "--amount", "total")
	if want := "field,type,role\nid,string,idempotency-key\ncustomer,string,\ntotal,number,\n"; r.stdout != want || r.stderr != "" {
		t.Errorf("schema with the file's fields named:\n%s\nwant:\n%s", r, want)
	}
}

// TestBatchHold: a batch file is held and released by its name, and not
// consumed while held; a hold by msg_id is refused on a queue of batch
// files (exit 2, one line), since its records are not looked up by msg_id.
func TestBatchHold(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv"}`)
	putBytes(t, q, "o.csv", []byte("msg_id,order_no,seq,amount\nA1,O1,1,10.00\n"))
	r := run(t, "hold", q, "--msg-id", "A1")
	if r.code != 2 || !strings.Contains(r.stderr, "whose records are not held by msg_id") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("hold --msg-id on a batch queue:\n%s", r)
	}
	mustRun(t, 0, "hold", q, "o.csv")
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st.Processed != 0 {
		t.Fatalf("a held batch file was consumed: %+v", st)
	}
	mustRun(t, 0, "release", q, "o.csv")
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st.Processed != 1 {
		t.Fatalf("the released batch file: %+v, want its record processed", st)
	}
}

// TestBatchHoldDoneFile: in a queue of files announced by done-files, a
// held file takes its done-file into held/, so that the producer's next
// file of that name, written meanwhile, waits for its own (and is not
// held before it is announced: its producer may still write it); released, the
// held file comes back announced under a free name and is consumed, and
// the producer's file is taken once announced.
func TestBatchHoldDoneFile(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv", "done_file": "{name}.done"}`)
	putBytes(t, q, "o.csv", []byte("msg_id,order_no,seq,amount\nA1,O1,1,10.00\n"))
	putBytes(t, q, "o.csv.done", nil)
	mustRun(t, 0, "hold", q, "o.csv")
	if got := stageNames(t, q, inbox); len(got) != 0 {
		t.Fatalf("inbox/ holds %q after the hold, want nothing (the done-file held with its file)", got)
	}
	putBytes(t, q, "o.csv", []byte("msg_id,order_no,seq,amount\nB1,O1,2,20.00\n")) // the next file, unannounced
	if r := run(t, "hold", q, "o.csv"); r.code != 1 || !strings.Contains(r.stderr, "not announced yet") {
		t.Fatalf("hold of a file waiting for its done-file:\n%s", r)
	}
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st.Processed != 0 {
		t.Fatalf("%+v: a file was taken, the held one or the unannounced one", st)
	}
	if r := mustRun(t, 0, "release", q, "o.csv"); !strings.Contains(r.stdout, "inbox/o~2.csv") {
		t.Fatalf("release did not name the file's new name:\n%s", r)
	}
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st.Processed != 1 {
		t.Fatalf("%+v, want the released file's record", st)
	}
	if got := stageNames(t, q, inbox); !slices.Equal(got, []string{"o.csv"}) {
		t.Fatalf("inbox/ holds %q, want the producer's file alone, waiting", got)
	}
	putBytes(t, q, "o.csv.done", nil)
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st.Processed != 1 {
		t.Fatalf("%+v, want the producer's file's record", st)
	}
	checkFsck(t, q)
}

// TestBatchEnqueueAnnounces: spool enqueue, the safe producer, announces
// what it renames into a queue with a done_file, under the name each file
// got there, so the files are taken (and not left waiting for an
// announcement nobody will write).
func TestBatchEnqueueAnnounces(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "jsonl", "done_file": "{name}.done"}`)
	src := filepath.Join(t.TempDir(), "feed.jsonl")
	if err := os.WriteFile(src, []byte(`{"msg_id":"e1","order_no":"o","seq":1,"amount":"1.00"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, 0, "enqueue", q, src, src); r.stdout != "feed.jsonl\nfeed~2.jsonl\n" {
		t.Fatalf("enqueue printed %q", r.stdout)
	}
	if got := stageNames(t, q, inbox); !slices.Equal(got, []string{"feed.jsonl", "feed.jsonl.done", "feed~2.jsonl", "feed~2.jsonl.done"}) {
		t.Fatalf("inbox/ holds %q, want each file with its done-file", got)
	}
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st.Processed != 1 || st.Duplicates != 1 {
		t.Fatalf("%+v, want the record once and its copy a duplicate", st)
	}
	checkFsck(t, q)
}

// TestBatchPruneDoneFiles: prune --files removes the done-files that
// came into done/ with their batch files once they are older than the
// window, as it removes the files (no ledger row records a done-file, so
// nothing else would), and leaves the newer ones; fsck stays clean.
func TestBatchPruneDoneFiles(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "jsonl", "done_file": "{name}.done"}`)
	src := filepath.Join(t.TempDir(), "feed.jsonl")
	if err := os.WriteFile(src, []byte(`{"msg_id":"p1","order_no":"o","seq":1,"amount":"1.00"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, "enqueue", q, src, src)
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st.Processed != 1 || st.Duplicates != 1 {
		t.Fatalf("%+v, want the record once and its copy a duplicate", st)
	}
	all := []string{"feed.jsonl", "feed.jsonl.done", "feed~2.jsonl", "feed~2.jsonl.done"}
	if got := stageNames(t, q, done); !slices.Equal(got, all) {
		t.Fatalf("done/ holds %q, want %q", got, all)
	}
	if r := mustRun(t, 0, "prune", q, "--older-than", "1h", "--files"); !strings.Contains(r.stdout, " files=0 ") {
		t.Errorf("a prune of nothing says:\n%s", r)
	}
	if got := stageNames(t, q, done); !slices.Equal(got, all) {
		t.Fatalf("done/ holds %q after a prune of nothing, want %q", got, all)
	}
	time.Sleep(10 * time.Millisecond) // the window's edge after every move into done/
	if r := mustRun(t, 0, "prune", q, "--older-than", "1ms", "--files", "--dry-run"); !strings.Contains(r.stdout, " files=4 ") {
		t.Errorf("the dry run does not count the two files and their done-files:\n%s", r)
	}
	if got := stageNames(t, q, done); !slices.Equal(got, all) {
		t.Fatalf("done/ holds %q after a dry run, want %q", got, all)
	}
	if r := mustRun(t, 0, "prune", q, "--older-than", "1ms", "--files"); !strings.Contains(r.stdout, " files=4 ") {
		t.Errorf("prune does not say it removed the two files and their done-files:\n%s", r)
	}
	if got := stageNames(t, q, done); len(got) != 0 {
		t.Errorf("done/ holds %q after the prune, want nothing", got)
	}
	checkFsck(t, q)
}

// TestBatchDiscardWholeFile: a file that is no XML document goes to
// error/ with its done-file, the pair named alike when the name is taken
// there (e~2.xml and e~2.xml.done); spool discard takes the done-file
// away with its file, removed with it, or moved with it by --to, so that
// error/ is left empty rather than holding done-files that announce
// nothing.
func TestBatchDiscardWholeFile(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "xml", "record": "Order", "done_file": "{name}.done"}`)
	for _, round := range [][]string{{"e.xml", "f.xml"}, {"e.xml"}} {
		for _, name := range round {
			putBytes(t, q, name, []byte("<!-- nothing -->\n"))
			putBytes(t, q, name+".done", nil)
		}
		if st := parseStats(t, mustRun(t, 0, "consume", q)); st.DeadLetters != len(round) {
			t.Fatalf("%+v, want each file one dead letter", st)
		}
	}
	if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"e.xml", "e.xml.done", "e~2.xml", "e~2.xml.done", "f.xml", "f.xml.done"}) {
		t.Fatalf("error/ holds %q, want each file with its done-file, named alike", got)
	}
	mustRun(t, 0, "discard", q, "e.xml", "e~2.xml", "--note", "not an export")
	to := t.TempDir()
	if err := os.Chmod(to, 0o700); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, "discard", q, "f.xml", "--note", "to look at", "--to", to)
	if got := stageNames(t, q, errorStage); len(got) != 0 {
		t.Errorf("error/ holds %q after the discards, want nothing", got)
	}
	if got := dirNames(t, to); !slices.Equal(got, []string{"f.xml", "f.xml.done"}) {
		t.Errorf("--to holds %q, want f.xml and its done-file", got)
	}
	checkFsck(t, q)
}

// TestBatchFinishBesideStrayDoneFile: a done-file already in error/
// without its file (a finish killed between its two moves leaves one, as
// does an operator) is left as it is, and a dead letter of that name
// goes in beside it under the next suffix with its own done-file, the
// pair still matching: before, the file took the free name and its
// done-file a suffix (g.xml with g.xml~2.done), so a replay or discard of
// g.xml took the stray and left its own done-file behind.
func TestBatchFinishBesideStrayDoneFile(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "xml", "record": "Order", "done_file": "{name}.done"}`)
	if err := os.WriteFile(filepath.Join(q, errorStage, "g.xml.done"), []byte("stray"), 0o644); err != nil {
		t.Fatal(err)
	}
	putBytes(t, q, "g.xml", []byte("<!-- nothing -->\n"))
	putBytes(t, q, "g.xml.done", []byte("sent"))
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st.DeadLetters != 1 {
		t.Fatalf("%+v, want the file one dead letter", st)
	}
	if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"g.xml.done", "g~2.xml", "g~2.xml.done"}) {
		t.Fatalf("error/ holds %q, want the stray done-file and the dead letter beside it with its own", got)
	}
	for name, want := range map[string]string{"g.xml.done": "stray", "g~2.xml.done": "sent"} {
		if b, err := os.ReadFile(filepath.Join(q, errorStage, name)); err != nil || string(b) != want {
			t.Errorf("error/%s = %q, %v: want %q", name, b, err, want)
		}
	}
	// fsck tells of the stray, and of nothing else: g~2.xml.done has its
	// file beside it.
	r := mustRun(t, 0, "fsck", q)
	if !strings.Contains(r.stdout, "info stray-done-files: 1 done-files in error/") || !strings.Contains(r.stdout, "e.g. error/g.xml.done\n") ||
		!strings.Contains(r.stdout, ": ok") {
		t.Errorf("fsck does not tell of the stray alone:\n%s", r)
	}
	mustRun(t, 0, "discard", q, "g~2.xml", "--note", "not an export")
	if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"g.xml.done"}) {
		t.Errorf("error/ holds %q after the discard, want the stray alone", got)
	}
	if err := os.Remove(filepath.Join(q, errorStage, "g.xml.done")); err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, 0, "fsck", q); strings.Contains(r.stdout, "stray") {
		t.Errorf("fsck tells of a stray once it is removed:\n%s", r)
	}
}

// TestBatchReplayWholeFileAnnounced: a file that is no XML document is
// one dead letter, the file itself, which goes to error/ with its
// done-file; replayed, it comes back into inbox/ announced by that
// done-file, so it is taken again (and not left waiting for an
// announcement that came long ago).
func TestBatchReplayWholeFileAnnounced(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "xml", "record": "Order", "done_file": "{name}.done"}`)
	putBytes(t, q, "e.xml", []byte("<!-- nothing yet -->\n"))
	putBytes(t, q, "e.xml.done", []byte("sent by the ERP"))
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st.DeadLetters != 1 {
		t.Fatalf("%+v, want the file one dead letter", st)
	}
	// Fixed in place, as an operator does, then replayed.
	fixed := "<Orders><Order msg_id=\"r1\"><order_no>o</order_no><seq>1</seq><amount>1.00</amount></Order></Orders>\n"
	if err := os.WriteFile(filepath.Join(q, errorStage, "e.xml"), []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, "replay", q, "e.xml")
	if got := stageNames(t, q, inbox); !slices.Equal(got, []string{"e.xml", "e.xml.done"}) {
		t.Fatalf("inbox/ holds %q after the replay, want the file and its done-file", got)
	}
	if b, err := os.ReadFile(filepath.Join(q, inbox, "e.xml.done")); err != nil || string(b) != "sent by the ERP" {
		t.Errorf("inbox/e.xml.done = %q, %v: want the producer's done-file back", b, err)
	}
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st.Processed != 1 {
		t.Fatalf("%+v, want the replayed file's record processed", st)
	}
	checkFsck(t, q)
}

// TestBatchInitFrom: spool init --from into a queue whose spool.conf says
// csv copies the CSV files of the source and leaves its JSON ones, as a
// JSON queue leaves what is not *.json.
func TestBatchInitFrom(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	q, src := filepath.Join(base, "q"), filepath.Join(base, "src")
	for _, d := range []string{q, src} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, q, "spool.conf", `{"format": "csv"}`)
	writeFile(t, src, "a.csv", "msg_id,order_no,seq,amount\nA1,O1,1,10.00\n")
	writeFile(t, src, "b.json", `{"msg_id":"B"}`)
	r := mustRun(t, 0, "init", q, "--from", src)
	if !strings.Contains(r.stdout, "copied 1 message from") {
		t.Errorf("init --from:\n%s", r)
	}
	if got := stageNames(t, q, inbox); !slices.Equal(got, []string{"a.csv"}) {
		t.Errorf("inbox/ holds %q, want a.csv", got)
	}
	// The format given by flag in the same init: its files are the ones
	// copied.
	q2 := filepath.Join(base, "q2")
	r = mustRun(t, 0, "init", q2, "--format", "csv", "--from", src)
	if !strings.Contains(r.stdout, "copied 1 message from") {
		t.Errorf("init --format csv --from:\n%s", r)
	}
	if got := stageNames(t, q2, inbox); !slices.Equal(got, []string{"a.csv"}) {
		t.Errorf("inbox/ holds %q, want a.csv", got)
	}
}

// TestBatchInitFlags: spool init's format flags write the batch keys of
// spool.conf, which check shows and consume reads: a Shift_JIS CSV file
// announced by its done-file, with a record of its own characters; a
// combination the format refuses is exit 2 with nothing written.
func TestBatchInitFlags(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	if r := run(t, "init", q, "--format", "csv", "--record", "Order"); r.code != 2 || !strings.Contains(r.stderr, "record is for xml") {
		t.Fatalf("init --format csv --record: want exit 2 naming record\n%s", r)
	}
	if _, err := os.Stat(q); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused init created %s: %v", q, err)
	}
	mustRun(t, 0, "init", q, "--format", "csv", "--encoding", "shift_jis", "--include", "*.csv,*.csv.gz", "--done-file", "{name}.done")
	if r := mustRun(t, 0, "check", q); !strings.Contains(r.stdout, "csv") || !strings.Contains(r.stdout, "shift_jis") {
		t.Fatalf("check does not show the format:\n%s", r)
	}
	sjis, err := japanese.ShiftJIS.NewEncoder().String("msg_id,order_no,seq,amount,name\nm1,o1,1,1.00,東京\n")
	if err != nil {
		t.Fatal(err)
	}
	putBytes(t, q, "orders.csv", []byte(sjis))
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st != (consumeStats{}) {
		t.Fatalf("before its done-file: %+v, want nothing", st)
	}
	putBytes(t, q, "orders.csv.done", nil)
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st != (consumeStats{Processed: 1}) {
		t.Fatalf("%+v, want the record processed", st)
	}
	if n := queryLedger(t, filepath.Join(q, "ledger.db"), `SELECT COUNT(*) FROM processed WHERE msg_id = 'm1' AND instr(payload, ?) > 0`, `"name":"東京"`); n != 1 {
		t.Fatal("the record's own characters are not in the ledger")
	}
}

// TestBatchInPlaceMinAge: a producer that cannot rename writes its CSV in
// place under its final name, a piece at a time, each piece ending in the
// middle of a row. A watching consumer with --min-age takes the file only
// once it has not changed for that long: every row once, none cut short
// into a dead letter. (Without --min-age such a file is taken half-written:
// TestInPlaceWriterHint.)
func TestBatchInPlaceMinAge(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv"}`)
	data, _ := ordersCSV(1000, func(int) bool { return false })
	p := start(t, "consume", q, "--watch", "--min-age", "3s")
	f, err := os.OpenFile(filepath.Join(q, inbox, "orders.csv"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	const pieces = 20
	size := len(data)/pieces + 1
	for off := 0; off < len(data); off += size {
		piece := data[off:min(off+size, len(data))]
		if _, err := f.Write(piece); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // the producer's pace, not a wait for a result
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, cmdTimeout, "the file in done/", func() bool { return len(stageNames(t, q, done)) == 1 })
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if st := parseStats(t, r); r.code != 0 || st != (consumeStats{Processed: 1000}) {
		t.Fatalf("%+v, want the 1000 rows processed and nothing else\n%s", st, r)
	}
	if got := stageNames(t, q, errorStage); len(got) != 0 {
		t.Fatalf("error/ holds %q: a row was taken before the producer finished", got)
	}
	checkFsck(t, q)
}

// TestBatchWrittenOnAfterClaim: a producer that writes a batch file in
// place, without a done-file or --min-age, and goes on after the consumer
// claimed it (here a handler appends a row to the claimed file, after the
// reader has reached its end). The consumer warns as it moves the file to
// done/, and spool fsck reports the file as changed after its claim (exit
// 1), since the row written then was never read; put back into inbox/
// under a new name, the file gives that row, its others absorbed as
// duplicates, and fsck is clean. A file the consumer read to its end,
// however it grew meanwhile, is no finding: every other test's fsck.
func TestBatchWrittenOnAfterClaim(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv"}`)
	putBytes(t, q, "live.csv", []byte("msg_id,order_no,seq,amount\nw1,o,1,1.00\nw2,o,2,1.00\n"))
	appendRow := `case "$SPOOL_SEQ" in 1) printf 'w3,o,3,1.00\n' >> "$(ls -d "$SPOOL_QUEUE"/processing/*/live.csv)";; esac`
	r := mustRun(t, 0, "consume", q, "--exec", appendRow)
	if st := parseStats(t, r); st != (consumeStats{Processed: 2}) {
		t.Fatalf("%+v, want the 2 rows read before the append", st)
	}
	if !strings.Contains(r.stderr, `msg="batch file changed while it was read`) {
		t.Errorf("the consumer does not warn of the file written on in place:\n%s", r.stderr)
	}
	requireFindings(t, "fsck after the append", fsck(t, 1, q), map[string]int{"done-changed": 1})
	if err := os.Rename(filepath.Join(q, done, "live.csv"), filepath.Join(q, inbox, "live-rest.csv")); err != nil {
		t.Fatal(err)
	}
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st != (consumeStats{Processed: 1, Duplicates: 2}) {
		t.Fatalf("the file put back: %+v, want the appended row processed and the 2 others duplicates", st)
	}
	checkFsck(t, q)
}
