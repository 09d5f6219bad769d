package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/spoolq/spool/internal/testenv"
)

// Batch files as a hostile or careless producer sends them: a dead letter
// as large as its file, another format in the queue.

// unclosedCSV writes into inbox/ orders.csv: a header, a good row, then
// a row whose quote is never closed, followed by rows of about size
// bytes, which the quote makes one record with it to the end of the
// file. It returns that record's dead letter (the header and everything
// from the bad row on) as its size and SHA-256: the file is written as
// it is made, never held.
func unclosedCSV(t *testing.T, q string, size int) fileDigest {
	t.Helper()
	const header = "msg_id,order_no,seq,amount\n"
	tmp := filepath.Join(q, inbox, ".orders.csv.tmp")
	f, err := os.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	w := bufio.NewWriter(f)
	rest := io.MultiWriter(w, h)
	if _, err := io.WriteString(w, header+"b1,o,1,1.00\n"); err != nil {
		t.Fatal(err)
	}
	io.WriteString(h, header)
	n, err := io.WriteString(rest, `b2,"o,2,1.00`+"\n")
	for i := 3; err == nil && n < size; i++ {
		var k int
		k, err = fmt.Fprintf(rest, "b%d,o,%d,1.00\n", i, i)
		n += k
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(q, inbox, "orders.csv")); err != nil {
		t.Fatal(err)
	}
	return fileDigest{size: int64(len(header) + n), sum: [sha256.Size]byte(h.Sum(nil))}
}

// fileDigest is a large file's size and SHA-256.
type fileDigest struct {
	size int64
	sum  [sha256.Size]byte
}

// largeFileSum returns the size and SHA-256 of the file at path.
func largeFileSum(t *testing.T, path string) fileDigest {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		t.Fatal(err)
	}
	return fileDigest{size: n, sum: [sha256.Size]byte(h.Sum(nil))}
}

// sameFile fails t unless the file at path is want.
func sameFile(t *testing.T, path string, want fileDigest) {
	t.Helper()
	if got := largeFileSum(t, path); got != want {
		t.Fatalf("%s: %d bytes, not the %d of the record's dead letter, or other bytes", path, got.size, want.size)
	}
}

// TestBatchLargeDeadLetter: a dead letter as large as its batch file (a
// CSV whose quote is never closed, which makes the rest of the file one
// record) is copied from the file, never held: the consumer stays in
// bounded memory (it held four times the record before), and the dead
// letter is the record, whole. The plain build is measured: the race
// detector's own memory would hide the bound.
func TestBatchLargeDeadLetter(t *testing.T) {
	t.Parallel()
	size := 40 << 20
	if testenv.IsLong() {
		size = 256 << 20
	}
	q := batchQueue(t, `{"format": "csv"}`)
	want := unclosedCSV(t, q, size)
	peak, r := watchPeak(t, q, "orders.csv")
	if st := parseStats(t, r); st != (consumeStats{Processed: 1, DeadLetters: 1}) {
		t.Fatalf("%+v, want b1 processed and the rest one dead letter\n%s", st, r)
	}
	sameFile(t, filepath.Join(q, errorStage, "orders~L3.csv"), want)
	const bound = 64 << 20
	if peak > bound {
		t.Fatalf("consume's peak RSS was %d MiB for a dead letter of %d MiB, over %d MiB", peak>>20, want.size>>20, bound>>20)
	}
	checkFsck(t, q)
}

// watchPeak runs spool consume q --watch with args until file is in
// done/, stops it, and returns its peak resident memory (vmHWM) and
// what it printed; it fails unless consume exited 0.
func watchPeak(t *testing.T, q, file string, args ...string) (int64, result) {
	t.Helper()
	// Measured once the file is done: a process's VmHWM is its peak since
	// its exec. (ru_maxrss would count this test's own memory, which the
	// child had before its exec.)
	p := spoolAt{bin: plainSpool(t)}.start(t, append([]string{"consume", q, "--watch"}, args...)...)
	waitFor(t, cmdTimeout, file+" in done/", func() bool {
		_, err := os.Stat(filepath.Join(q, "done", file))
		return err == nil
	})
	peak := vmHWM(t, p.cmd.Process.Pid)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 0 {
		t.Fatalf("consume: exit %d\n%s", r.code, r)
	}
	return peak, r
}

// vmHWM is the peak resident memory of process pid since its exec, in
// bytes (VmHWM of /proc/PID/status).
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// TestBatchLargeDeadLetterCopy: a large dead letter an earlier run wrote
// into error/ and died before recording is found by its content, streamed,
// and recorded instead of writing another; a file of its name and size
// but other bytes is not taken for it.
func TestBatchLargeDeadLetterCopy(t *testing.T) {
	t.Parallel()
	for _, same := range []bool{true, false} {
		t.Run(fmt.Sprint("same=", same), func(t *testing.T) {
			q := batchQueue(t, `{"format": "csv"}`)
			want := unclosedCSV(t, q, 3<<20) // over what a chunk holds
			data, err := os.ReadFile(filepath.Join(q, inbox, "orders.csv"))
			if err != nil {
				t.Fatal(err)
			}
			// The dead letter: the header, then from the bad row on.
			head := bytes.IndexByte(data, '\n') + 1
			left := append(data[:head:head], data[bytes.Index(data, []byte(`b2,"o`)):]...)
			if !same {
				left[len(left)-2] = '9'
			}
			stray := filepath.Join(q, errorStage, "orders~L3.csv")
			if err := os.WriteFile(stray, left, 0o644); err != nil {
				t.Fatal(err)
			}
			if same && largeFileSum(t, stray) != want {
				t.Fatal("the copy made for the test is not the dead letter")
			}
			var st syscall.Stat_t
			if err := syscall.Stat(stray, &st); err != nil {
				t.Fatal(err)
			}
			r := mustRun(t, 0, "consume", q)
			if got := parseStats(t, r); got != (consumeStats{Processed: 1, DeadLetters: 1}) {
				t.Fatalf("%+v, want b1 processed and the rest one dead letter\n%s", got, r)
			}
			names, stored := []string{"orders~L3.csv"}, "orders~L3.csv"
			if !same {
				names, stored = []string{"orders~L3.csv", "orders~L3~2.csv"}, "orders~L3~2.csv"
			}
			if got := stageNames(t, q, errorStage); !slices.Equal(got, names) {
				t.Fatalf("error/ holds %q, want %q", got, names)
			}
			sameFile(t, filepath.Join(q, errorStage, stored), want)
			db := filepath.Join(q, "ledger.db")
			ino := queryLedger(t, db, `SELECT ino FROM deliveries WHERE outcome = 'dead-letter' AND file = '`+stored+`'`)
			if same != (uint64(ino) == st.Ino) {
				t.Fatalf("the dead letter is recorded with inode %d; the file left in error/ has %d (same content: %v)", ino, st.Ino, same)
			}
		})
	}
}

// TestBatchWrongFormat: a file of another format sent to a JSON Lines
// queue (a CSV export, a binary) is one dead letter of the whole file
// that says so, not a dead letter a line (20 001 files in error/ for a
// CSV of 20 000 rows before); so is a CSV export whose header has no
// column for the key (2 000 dead letters for 2 000 rows before). An XML
// file without the queue's record elements is no failure (an export of
// none is not either), but consume warns.
func TestBatchWrongFormat(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "jsonl"}`)
	var csv strings.Builder
	csv.WriteString("msg_id,order_no,seq,amount\n")
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&csv, "c%d,o,%d,1.00\n", i, i)
	}
	putBytes(t, q, "orders.jsonl", []byte(csv.String()))
	putBytes(t, q, "tool.jsonl", []byte("\x7fELF\x02\x01\x01\x00\x00\n\x00\x00"))
	putBytes(t, q, "pretty.jsonl", []byte("{\n  \"msg_id\": \"p1\",\n  \"order_no\": \"o\",\n  \"seq\": 1,\n  \"amount\": \"1.00\"\n}\n"))
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st != (consumeStats{DeadLetters: 3}) {
		t.Fatalf("%+v, want the three files dead-lettered whole", st)
	}
	if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"orders.jsonl", "pretty.jsonl", "tool.jsonl"}) {
		t.Fatalf("error/ holds %q, want the three files", got)
	}
	out := mustRun(t, 0, "errors", q, "--detail").stdout
	for _, want := range []string{
		`orders.jsonl,parse,,"line 1 starts with 'm', where a JSON object starts with {: the file is not JSON Lines`,
		`tool.jsonl,parse,,"line 1 starts with byte 0x7F`,
		`pretty.jsonl,parse,,"line 1 ends inside the JSON object it starts: the file is JSON written over several lines`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("spool errors --detail does not say %q:\n%s", want, out)
		}
	}
	checkFsck(t, q)

	// A CSV export of another system, whose header has no column for the
	// contract's key: one dead letter, not one a row.
	q = batchQueue(t, `{"format": "csv"}`)
	var other strings.Builder
	other.WriteString("id,customer,total\n")
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&other, "%d,c,%d.00\n", i, i)
	}
	putBytes(t, q, "export.csv", []byte(other.String()))
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st != (consumeStats{DeadLetters: 1}) {
		t.Fatalf("%+v, want the file dead-lettered whole", st)
	}
	if out := mustRun(t, 0, "errors", q, "--detail").stdout; !strings.Contains(out, `export.csv,parse,,"the header (line 1): no column ""msg_id"", which the contract requires`) {
		t.Errorf("spool errors --detail does not name the missing column:\n%s", out)
	}
	checkFsck(t, q)

	// An XML file whose elements are not the queue's record holds no
	// record, and goes to done/ as a file of none would; consume warns.
	q = batchQueue(t, `{"format": "xml", "record": "Order"}`)
	putBytes(t, q, "inv.xml", []byte("<Invoices><Invoice><id>1</id></Invoice></Invoices>\n"))
	r := mustRun(t, 0, "consume", q)
	if st := parseStats(t, r); st != (consumeStats{}) || !strings.Contains(r.stderr, `level=WARN msg="batch file read" file=inv.xml note="no <Order> element, the queue's record, in the file, which holds <Invoice>`) {
		t.Errorf("consume of an XML file without the queue's records did not warn:\n%s", r)
	}
}

// TestBatchCapitalNames: a file named in capitals (ORDERS.CSV, as
// Windows exports often are) is not taken by *.csv, and status and
// consume say that case alone keeps it out.
func TestBatchCapitalNames(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv"}`)
	putBytes(t, q, "ORDERS.CSV", []byte("msg_id,order_no,seq,amount\nk1,o,1,1.00\n"))
	const hint = "names are case-sensitive: ORDERS.CSV is not orders.csv"
	if out := mustRun(t, 0, "status", q).stdout; !strings.Contains(out, "1 entry the queue never takes, not named as its messages are (*.csv): ORDERS.CSV ("+hint+")\n") {
		t.Errorf("status does not say why ORDERS.CSV waits:\n%s", out)
	}
	if out := mustRun(t, 0, "status", q, "--json").stdout; !strings.Contains(out, `"inbox_not_taken_hint": "`+hint+`"`) {
		t.Errorf("status --json does not say why ORDERS.CSV waits:\n%s", out)
	}
	r := mustRun(t, 0, "consume", q)
	if !strings.Contains(r.stderr, `first=[ORDERS.CSV] hint="`+hint+`"`) {
		t.Errorf("consume does not say why ORDERS.CSV waits:\n%s", r.stderr)
	}
}

// TestBatchReadWarnings: a batch file read to its end whose every record
// is a dead letter (another system's JSON Lines, without the key) is
// warned of once, with the first reason, beside its dead letters' lines;
// and an XML file without the queue's records is warned of with calls
// (--exec) as without them.
func TestBatchReadWarnings(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "jsonl"}`)
	putBytes(t, q, "other.jsonl", []byte(`{"id":1,"customer":"c"}`+"\n"+`{"id":2,"customer":"d"}`+"\n"))
	putBytes(t, q, "mixed.jsonl", []byte(`{"id":1}`+"\n"+`{"msg_id":"m1","order_no":"o","seq":1,"amount":"1.00"}`+"\n"))
	r := mustRun(t, 0, "consume", q)
	if st := parseStats(t, r); st != (consumeStats{Processed: 1, DeadLetters: 3}) {
		t.Fatalf("%+v, want m1 processed and the three others dead-lettered", st)
	}
	const warn = `level=WARN msg="batch file read: every record is a dead letter; is the file this queue's, and the contract the files'?"`
	if !strings.Contains(r.stderr, warn+` file=other.jsonl dead_letters=2 first="missing-field: msg_id: line 1: required field is missing"`) {
		t.Errorf("consume does not warn of other.jsonl:\n%s", r.stderr)
	}
	if strings.Count(r.stderr, warn) != 1 {
		t.Errorf("consume warns of a file with a record processed:\n%s", r.stderr)
	}

	q = batchQueue(t, `{"format": "xml", "record": "Order"}`)
	putBytes(t, q, "inv.xml", []byte("<Invoices><Invoice><id>1</id></Invoice></Invoices>\n"))
	r = mustRun(t, 0, "consume", q, "--exec", "cat >/dev/null")
	if !strings.Contains(r.stderr, `level=WARN msg="batch file read" file=inv.xml note="no <Order> element`) {
		t.Errorf("consume --exec does not warn of an XML file without records:\n%s", r.stderr)
	}
}

// TestBatchHeavyRecords: records that weigh much in memory, large ones
// or CSV rows of many columns (a row's Fields outweigh its bytes), are
// held a few at a time with a handler and with calls too: a chunk of
// BatchSize records with --sql held 283 MB for 40 records of 3 MiB and
// 491 MB for 150 rows of 20 000 columns (1.09 GB for 400) before chunks
// were bounded by what their records weigh with a handler (BatchBytes).
func TestBatchHeavyRecords(t *testing.T) {
	t.Parallel()
	large := func(t *testing.T, q string) int {
		f, err := os.Create(filepath.Join(q, inbox, ".orders.jsonl.tmp"))
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriter(f)
		doc := strings.Repeat("x", 3<<20)
		const n = 40
		for i := 1; i <= n; i++ {
			fmt.Fprintf(w, `{"msg_id":"b%d","order_no":"o%d","seq":%d,"amount":"2.50","doc":"%s"}`+"\n", i, i%9, i, doc)
		}
		closeRename(t, f, w, filepath.Join(q, inbox, "orders.jsonl"))
		return n
	}
	wide := func(t *testing.T, q string) int {
		f, err := os.Create(filepath.Join(q, inbox, ".orders.csv.tmp"))
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriter(f)
		const n, columns = 150, 20000
		w.WriteString("msg_id,order_no,seq,amount")
		for c := range columns {
			fmt.Fprintf(w, ",c%d", c)
		}
		empty := strings.Repeat(",", columns)
		for i := 1; i <= n; i++ {
			fmt.Fprintf(w, "\nm%d,o%d,%d,1.00%s", i, i%7, i, empty)
		}
		w.WriteString("\n")
		closeRename(t, f, w, filepath.Join(q, inbox, "orders.csv"))
		return n
	}
	for _, tc := range []struct {
		name, conf, file string
		write            func(*testing.T, string) int
		handler          []string
	}{
		{"large/sql", `{"format": "jsonl", "max_size": 4194304}`, "orders.jsonl", large, []string{"--sql"}},
		{"large/exec", `{"format": "jsonl", "max_size": 4194304}`, "orders.jsonl", large, []string{"--exec", "cat >/dev/null"}},
		{"wide/sql", `{"format": "csv"}`, "orders.csv", wide, []string{"--sql"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := batchQueue(t, tc.conf)
			if tc.handler[0] == "--sql" {
				tc.handler = append(tc.handler, writeFile(t, t.TempDir(), "book.sql",
					"CREATE TABLE IF NOT EXISTS booked (msg_id TEXT PRIMARY KEY);\nINSERT INTO booked (msg_id) VALUES (:msg_id);\n"))
			}
			n := tc.write(t, q)
			peak, r := watchPeak(t, q, tc.file, tc.handler...)
			if st := parseStats(t, r); st != (consumeStats{Processed: n}) {
				t.Fatalf("%+v, want %d processed\n%s", st, n, r)
			}
			const bound = 160 << 20
			if peak > bound {
				t.Fatalf("consume %s: peak RSS %d MiB, over %d MiB", strings.Join(tc.handler, " "), peak>>20, bound>>20)
			}
			t.Logf("peak RSS %d MiB", peak>>20)
			checkFsck(t, q)
		})
	}
}

// closeRename flushes w, closes f and renames it to name, as a producer
// puts a finished file into inbox/.
func closeRename(t *testing.T, f *os.File, w *bufio.Writer, name string) {
	t.Helper()
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(f.Name(), name); err != nil {
		t.Fatal(err)
	}
}

// TestBatchFixedAsUTF8: a dead letter of a windows-1252 queue, fixed and
// saved as Excel's "CSV UTF-8" does (UTF-8, with its byte order mark),
// is replayed and read as UTF-8, its characters intact; before, a UTF-8
// mark in a queue of another encoding failed the file whole.
func TestBatchFixedAsUTF8(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv", "encoding": "windows-1252"}`)
	putBytes(t, q, "orders.csv", []byte("msg_id,order_no,seq,amount,name\r\nw1,A,1,1.00,M\xfcller,extra\r\nw2,A,2,2.00,G\xf6del\r\n"))
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st != (consumeStats{Processed: 1, DeadLetters: 1}) {
		t.Fatalf("%+v, want w2 processed and w1 a dead letter", st)
	}
	dl := filepath.Join(q, errorStage, "orders~L2.csv")
	if err := os.WriteFile(dl, []byte("\ufeffmsg_id,order_no,seq,amount,name\r\nw1,A,1,1.00,M\u00fcller\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, "replay", q, "orders~L2.csv")
	if st := parseStats(t, mustRun(t, 0, "consume", q)); st != (consumeStats{Processed: 1}) {
		t.Fatalf("%+v, want the fixed w1 processed", st)
	}
	var payload string
	if err := openLedger(t, q).QueryRow(`SELECT payload FROM processed WHERE msg_id = 'w1'`).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(payload, "\"name\":\"M\u00fcller\"") {
		t.Fatalf("w1's payload is %s, want its name M\u00fcller", payload)
	}
	checkFsck(t, q)
}
