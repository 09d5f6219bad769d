//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
	"golang.org/x/text/encoding/htmlindex"
)

// TestBatchCrash kills consumers with SIGKILL in the middle of an
// announced JSON Lines file of 50 000 records, a few times, then lets one
// run finish: every record is processed exactly once (one processed row
// per key, no duplicate recorded: a resumed run starts after the last
// record committed), every bad line (one in 997) has exactly one dead
// letter in error/ and one record (a dead letter written before a kill
// and not yet recorded is found again, not written twice), nothing is left
// in processing/ or inbox/, the file is in done/, and fsck finds nothing
// wrong. The long run kills 20 times in a file of 1 000 000 records.
func TestBatchCrash(t *testing.T) {
	t.Parallel()
	if testenv.IsLong() {
		// The race detector sees the same code at the quick size, and
		// under it this size takes minutes.
		batchCrash(t, spoolAt{bin: plainSpool(t)}, sqliteEngine, "jsonl", 1_000_000, 20)
		return
	}
	batchCrash(t, spoolAt{bin: spoolBin}, sqliteEngine, "jsonl", 50_000, 4)
}

// TestBatchCrashCSV is TestBatchCrash on a CSV file, whose bad rows have a
// column missing: 50 000 records quick, 1 000 000 and 20 kills long.
func TestBatchCrashCSV(t *testing.T) {
	t.Parallel()
	if testenv.IsLong() {
		batchCrash(t, spoolAt{bin: plainSpool(t)}, sqliteEngine, "csv", 1_000_000, 20)
		return
	}
	batchCrash(t, spoolAt{bin: spoolBin}, sqliteEngine, "csv", 50_000, 4)
}

// TestBatchCrashEngines is TestBatchCrash on a PostgreSQL and a MariaDB
// ledger (SPOOL_TEST_POSTGRES, SPOOL_TEST_MYSQL; skipped without them,
// required on CI): the progress commits with the records on every engine.
// The long run kills 20 times in a JSON Lines file of 1 000 000 records
// and in a CSV file of 200 000 on each.
func TestBatchCrashEngines(t *testing.T) {
	t.Parallel()
	for _, b := range []ledgerBackend{postgresEngine, mysqlEngine} {
		t.Run(b.name, func(t *testing.T) {
			if testenv.IsLong() {
				sp := spoolAt{bin: plainSpool(t)}
				batchCrash(t, sp, b, "jsonl", 1_000_000, 20)
				batchCrash(t, sp, b, "csv", 200_000, 20)
				return
			}
			batchCrash(t, spoolAt{bin: spoolBin}, b, "jsonl", 20_000, 3)
		})
	}
}

// TestBatchCrashDecoded is TestBatchCrash on the files whose offsets are
// not the file's, so that a resumed run reads the file again from its
// start: a gzipped JSON Lines file and a UTF-16LE CSV file. 20 000
// records and 4 kills quick, 200 000 and 20 long.
func TestBatchCrashDecoded(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"jsonl.gz", "csv/utf-16le"} {
		t.Run(strings.ReplaceAll(format, "/", " "), func(t *testing.T) {
			t.Parallel()
			if testenv.IsLong() {
				batchCrash(t, spoolAt{bin: plainSpool(t)}, sqliteEngine, format, 200_000, 20)
				return
			}
			batchCrash(t, spoolAt{bin: spoolBin}, sqliteEngine, format, 20_000, 4)
		})
	}
}

// batchCrash is the crash test of an announced batch file of records in
// format (jsonl or csv; with ".gz", gzipped; with "/" and an encoding,
// such as csv/utf-16le, written in it), with sp's binary on backend's
// ledger, killed minKills times at least.
func batchCrash(t *testing.T, sp spoolAt, backend ledgerBackend, format string, records, minKills int) {
	rng := newRand(t)
	format, encoding, _ := strings.Cut(format, "/")
	format, gz := strings.CutSuffix(format, ".gz")
	conf := `{"format": "` + format + `", "done_file": "{name}.done"`
	if encoding != "" {
		conf += `, "encoding": "` + encoding + `"`
	}
	if gz {
		conf += `, "include": ["*.` + format + `", "*.` + format + `.gz"]`
	}
	q := batchQueue(t, conf+"}")
	l := backend.open(t, q)
	args := l.args
	var b bytes.Buffer
	var bad []string
	line := 0 // the record's line: a CSV file's header is line 1
	if format == "csv" {
		b.WriteString("msg_id,order_no,seq,amount\n")
		line = 1
	}
	for i := 1; i <= records; i++ {
		line++
		switch {
		case i%997 == 0 && format == "csv":
			fmt.Fprintf(&b, "k%d,o%d,%d\n", i, i%100, i) // a column missing
		case i%997 == 0:
			b.WriteString("not a JSON object\n")
		case format == "csv":
			fmt.Fprintf(&b, "k%d,o%d,%d,%d.00\n", i, i%100, i, i)
		default:
			fmt.Fprintf(&b, `{"msg_id":"k%d","order_no":"o%d","seq":%d,"amount":"%d.00"}`+"\n", i, i%100, i, i)
		}
		if i%997 == 0 {
			bad = append(bad, fmt.Sprintf("feed~L%d.%s", line, format))
		}
	}
	slices.Sort(bad)
	good := records - len(bad)
	file := "feed." + format
	data := b.Bytes()
	if encoding != "" {
		e, err := htmlindex.Get(encoding)
		if err != nil {
			t.Fatal(err)
		}
		if data, err = e.NewEncoder().Bytes(data); err != nil {
			t.Fatal(err)
		}
		data = append([]byte{0xFF, 0xFE}, data...) // the mark of utf-16le, as Windows writes it
	}
	if gz {
		file += ".gz"
		data = gzipped(t, data)
	}
	putBytes(t, q, file, data)
	putBytes(t, q, file+".done", nil)
	kills := 0
	for run := 0; kills < minKills; run++ {
		if run > 20*minKills {
			t.Fatalf("%d runs and only %d kills in the middle of the file", run, kills)
		}
		pos := batchPosition(l)
		p := sp.start(t, append([]string{"consume", q, "--batch", strconv.Itoa(1 + rng.IntN(200))}, args...)...)
		// Kill a random moment after the run has committed records of its
		// own: in the middle of the file, whatever the machine's speed.
		progressed := false
		for !progressed {
			select {
			case <-p.done:
			default:
				if now := batchPosition(l); now != "" && now != pos {
					progressed = true
					continue
				}
				time.Sleep(time.Millisecond) // poll interval, not a wait for a result
				continue
			}
			break
		}
		if !progressed || !p.killAfter(t, logDelay(rng, 100*time.Microsecond, 200*time.Millisecond)) {
			if r := p.result(); r.code != 0 {
				t.Fatalf("consumer exited by itself with a failure:\n%s", r)
			}
			break // it finished the file before the kill: too fast a machine for more
		}
		kills++
		n, _ := ledgerProcessed(l)
		if n >= good {
			break
		}
		// The batch file is claimed whole: it is in inbox/ or in one claim.
		if in, claims := countNames(t, q, inbox)+countNamesLike(t, q, inbox, filepath.Ext(file)), liveClaims(q); in+claims < 1 {
			t.Fatalf("after kill %d the batch file is neither in inbox/ nor claimed", kills)
		}
	}
	t.Logf("%d kills in the middle of the file", kills)
	// A kill while a dead letter was written leaves its temp file, which
	// a start removes once it is a minute old (queue.StaleTempAge): that
	// minute passes here, however slow the machine was until now.
	ageTemps(t, q, 2*time.Minute)
	// The last run drains what the kills left, most of a long run's
	// million records: on MariaDB, beside the other long tests on two
	// cores, that took over two minutes once.
	r := sp.runWithin(t, testenv.Pick(10*time.Minute, cmdTimeout), append([]string{"consume", q}, args...)...)
	if r.code != 0 {
		t.Fatalf("the last run: want exit 0, got\n%s", r)
	}
	st := parseStats(t, r)
	if st.Duplicates != 0 {
		t.Fatalf("the last run: %+v, want no duplicate", st)
	}
	if n := l.count(t, `SELECT COUNT(*) FROM %[1]s`); n != good {
		t.Fatalf("%d processed rows, want %d", n, good)
	}
	if n := l.count(t, `SELECT COUNT(*) FROM %[2]s WHERE outcome = 'duplicate'`); n != 0 {
		t.Fatalf("%d duplicate deliveries: a record was recorded twice", n)
	}
	if n := l.count(t, `SELECT COUNT(DISTINCT claim) FROM %[1]s`); n != good {
		t.Fatalf("%d record claims for %d records", n, good)
	}
	if n := l.count(t, `SELECT COUNT(DISTINCT file) FROM %[2]s WHERE outcome = 'dead-letter' AND reason = 'parse'`); n != len(bad) {
		t.Fatalf("%d dead letters recorded, want %d", n, len(bad))
	}
	if n := l.count(t, `SELECT COUNT(*) FROM %[2]s WHERE outcome = 'dead-letter'`); n != len(bad) {
		t.Fatalf("%d dead-letter records, want %d", n, len(bad))
	}
	if got := stageNames(t, q, errorStage); !slices.Equal(got, bad) {
		t.Fatalf("error/ holds %d files (%q...), want %d, one a bad line", len(got), got[:min(len(got), 5)], len(bad))
	}
	// The file, and its done-file once per claim of it that ended (a
	// recovery finishes the claimed done-file and announces the file
	// again): feed.jsonl.done, feed.jsonl~2.done...
	got := stageNames(t, q, done)
	if !slices.Contains(got, file) || !slices.Contains(got, file+".done") {
		t.Fatalf("done/ holds %q, want the file and its done-file", got)
	}
	for _, n := range got {
		if n != file && !strings.HasSuffix(n, ".done") {
			t.Fatalf("done/ holds %q", got)
		}
	}
	if got := stageNames(t, q, processing); len(got) != 0 {
		t.Fatalf("processing/ holds %q", got)
	}
	if got := stageNames(t, q, inbox); len(got) != 0 {
		t.Fatalf("inbox/ holds %q", got)
	}
	// spool status counts each record once, however often its consumer
	// was killed.
	want := []batchFileCounts{{File: file, Processed: good, DeadLetters: len(bad)}}
	if got := statusBatchFiles(t, sp, q, args...); !slices.Equal(got, want) {
		t.Fatalf("spool status shows batch files %+v, want %+v", got, want)
	}
	sp.checkFsck(t, q, args...)
}

// batchFileCounts is a batch file's line of spool status --json, without
// its time.
type batchFileCounts struct {
	File                               string
	Processed, Duplicates, DeadLetters int
}

// statusBatchFiles reads spool status --json's batch files of q.
func statusBatchFiles(t *testing.T, sp spoolAt, q string, args ...string) []batchFileCounts {
	t.Helper()
	r := sp.mustRun(t, 0, append([]string{"status", q, "--json"}, args...)...)
	var st struct {
		BatchFiles []struct {
			File        string `json:"file"`
			Processed   int    `json:"processed"`
			Duplicates  int    `json:"duplicates"`
			DeadLetters int    `json:"dead_letters"`
		} `json:"batch_files"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.BatchFiles == nil {
		t.Fatalf("status --json: %v, batch_files %v\n%s", err, st.BatchFiles, r)
	}
	var out []batchFileCounts
	for _, f := range st.BatchFiles {
		out = append(out, batchFileCounts{f.File, f.Processed, f.Duplicates, f.DeadLetters})
	}
	return out
}

// ageTemps makes the temp files of q's directory and inbox/ (where spool
// writes them) older by d.
func ageTemps(t *testing.T, q string, d time.Duration) {
	t.Helper()
	for _, dir := range []string{q, filepath.Join(q, inbox)} {
		des, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range des {
			if !strings.HasPrefix(de.Name(), ".spool-tmp-") {
				continue
			}
			fi, err := de.Info()
			if err != nil {
				t.Fatal(err)
			}
			old := fi.ModTime().Add(-d)
			if err := os.Chtimes(filepath.Join(dir, de.Name()), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// batchPosition is how far the consumers of l got in their batch files
// (spool_batch_progress, every file's position), "" when it cannot be
// read: a read of a row a file, where polling a COUNT(*) of up to a
// million processed rows while a run went kept the test process, its
// SQLite race-instrumented, busy for minutes.
func batchPosition(l callLedger) string {
	rows, err := l.db.Query(`SELECT file, position FROM ` + l.table("spool_batch_progress") + ` ORDER BY file`)
	if err != nil {
		return ""
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var file, position string
		if rows.Scan(&file, &position) != nil {
			return ""
		}
		b.WriteString(file + "=" + position + ";")
	}
	if rows.Err() != nil {
		return ""
	}
	return b.String()
}

// ledgerProcessed counts the processed rows of l while consumers write
// it; false while it cannot be read (its tables not made yet).
func ledgerProcessed(l callLedger) (int, bool) {
	var n int
	if err := l.db.QueryRow(`SELECT COUNT(*) FROM ` + l.table("processed")).Scan(&n); err != nil {
		return 0, false
	}
	return n, true
}

// stopOnceCommitted sends SIGTERM to p once its ledger l has processed
// rows, waits for its graceful stop, and fails unless it exited 0 with
// processing/ of q empty; it returns what the run did.
func stopOnceCommitted(t *testing.T, p *proc, l callLedger, q string) result {
	t.Helper()
	waitFor(t, cmdTimeout, "the first records committed", func() bool {
		n, _ := ledgerProcessed(l)
		return n > 0
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 0 {
		t.Fatalf("a stopped consumer exited with a failure:\n%s", r)
	}
	if got := stageNames(t, q, processing); len(got) != 0 {
		t.Fatalf("processing/ holds %q after a graceful stop", got)
	}
	return r
}

// countNamesLike counts the names of a stage ending in ext.
func countNamesLike(t *testing.T, q, stage, ext string) int {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(q, stage))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, de := range des {
		if filepath.Ext(de.Name()) == ext {
			n++
		}
	}
	return n
}

// TestBatchDeadLetterResume: a consumer killed after writing a record's
// dead letter into error/ and before recording it left the file there;
// the run that resumes the batch file records that file as the record's
// dead letter instead of writing a second one. The state is made by hand:
// the progress a killed run committed (after the first record) and the
// dead letter of the third, unrecorded.
func TestBatchDeadLetterResume(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv"}`)
	mustRun(t, 0, "consume", q) // makes the ledger's tables
	header, rows := "msg_id,order_no,seq,amount\n", []string{"a1,o,1,1.00\n", "a2,o,2,2.00\n", "a3,o,3\n", "a4,o,4,4.00\n"}
	data := header
	for _, r := range rows {
		data += r
	}
	putBytes(t, q, "orders.csv", []byte(data))
	putBytes(t, q, "orders~L4.csv", []byte(header+rows[2]))
	if err := os.Rename(filepath.Join(q, inbox, "orders~L4.csv"), filepath.Join(q, errorStage, "orders~L4.csv")); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(q, inbox, "orders.csv"), &st); err != nil {
		t.Fatal(err)
	}
	fileID := fmt.Sprintf("orders.csv:%d:%d:%d", st.Ino, st.Size, time.Unix(st.Mtim.Unix()).UnixNano())
	position := fmt.Sprintf("1:%d:3", len(header)+len(rows[0]))
	execLedger(t, filepath.Join(q, "ledger.db"),
		`INSERT INTO spool_batch_progress (file, batch, position, at) VALUES ('`+fileID+`', 'killed-run', '`+position+`', '2026-01-01T00:00:00.000000Z')`)
	r := mustRun(t, 0, "consume", q)
	if got := parseStats(t, r); got != (consumeStats{Processed: 2, DeadLetters: 1}) {
		t.Fatalf("%+v, want a2 and a4 processed (a1 was, before the kill) and a3 dead-lettered\n%s", got, r)
	}
	if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"orders~L4.csv"}) {
		t.Fatalf("error/ holds %q, want the one dead letter the killed run wrote", got)
	}
	db := filepath.Join(q, "ledger.db")
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter' AND file = 'orders~L4.csv' AND claim = 'killed-run#2'`); n != 1 {
		t.Fatal("the dead letter is not recorded under its record's claim")
	}
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM processed WHERE msg_id IN ('a2', 'a4')`); n != 2 {
		t.Fatal("a2 and a4 are not processed")
	}
}

// TestBatchHandlerDeadLetterResume: a consumer killed after committing a
// record its handler dead-lettered, and before writing its one-record
// file, left the dead letter recorded under the record's origin; the run
// that resumes the batch file writes the file and names it in the record.
// The state is made by hand, as TestBatchDeadLetterResume's.
func TestBatchHandlerDeadLetterResume(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "csv"}`)
	mustRun(t, 0, "consume", q) // makes the ledger's tables
	header, rows := "msg_id,order_no,seq,amount\n", []string{"A,O,1,1.00\n", "B,O,2,2.00\n", "C,O,3,3.00\n"}
	putBytes(t, q, "book.csv", []byte(header+rows[0]+rows[1]+rows[2]))
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(q, inbox, "book.csv"), &st); err != nil {
		t.Fatal(err)
	}
	fileID := fmt.Sprintf("book.csv:%d:%d:%d", st.Ino, st.Size, time.Unix(st.Mtim.Unix()).UnixNano())
	position := fmt.Sprintf("2:%d:4", len(header)+len(rows[0])+len(rows[1]))
	db := filepath.Join(q, "ledger.db")
	execLedger(t, db,
		`INSERT INTO spool_batch_progress (file, batch, position, at) VALUES ('`+fileID+`', 'killed-run', '`+position+`', '2026-01-01T00:00:00.000000Z')`,
		fmt.Sprintf(`INSERT INTO deliveries (claim, file, ino, consumer, msg_id, outcome, reason, detail, at)
			VALUES ('killed-run#1', 'book.csv#L3', %d, 'killed', 'B', 'dead-letter', 'handler', 'order closed', '2026-01-01T00:00:00.000000Z')`, st.Ino))
	r := mustRun(t, 0, "consume", q)
	if got := parseStats(t, r); got != (consumeStats{Processed: 1}) {
		t.Fatalf("%+v, want C processed\n%s", got, r)
	}
	if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"book~L3.csv"}) {
		t.Fatalf("error/ holds %q, want B's dead letter", got)
	}
	b, err := os.ReadFile(filepath.Join(q, errorStage, "book~L3.csv"))
	if err != nil || string(b) != header+rows[1] {
		t.Fatalf("B's dead letter is %q, %v", b, err)
	}
	if n := queryLedger(t, db, `SELECT COUNT(*) FROM deliveries WHERE claim = 'killed-run#1' AND file = 'book~L3.csv' AND ino IS NOT NULL AND ino <> ?`, st.Ino); n != 1 {
		t.Fatal("B's dead letter does not name its file and inode")
	}
}

// TestBatchGracefulStop: a consumer stopped by SIGTERM in the middle of an
// announced batch file commits what it read, gives the file and its
// done-file back to inbox/ and
// exits 0 with processing/ empty; the next run resumes it, and every
// record is processed once.
func TestBatchGracefulStop(t *testing.T) {
	t.Parallel()
	records := testenv.Pick(100_000, 20_000)
	q := batchQueue(t, `{"format": "jsonl", "done_file": "{name}.done"}`)
	l := sqliteEngine.open(t, q)
	var b bytes.Buffer
	for i := 1; i <= records; i++ {
		fmt.Fprintf(&b, `{"msg_id":"k%d","order_no":"o","seq":%d,"amount":"1.00"}`+"\n", i, i)
	}
	putBytes(t, q, "feed.jsonl", b.Bytes())
	putBytes(t, q, "feed.jsonl.done", nil)
	sp := longSpool(t) // 100 000 records: 77 s under the race detector
	r := stopOnceCommitted(t, sp.start(t, "consume", q, "--batch", "50"), l, q)
	first := parseStats(t, r).Processed
	if slices.Equal(stageNames(t, q, inbox), []string{"feed.jsonl", "feed.jsonl.done"}) {
		if first >= records {
			t.Fatalf("the file is back in inbox/ with all %d records processed", first)
		}
		t.Logf("stopped after %d records, the file given back", first)
	} else if first != records {
		t.Fatalf("the file is not back in inbox/, and %d of %d records are processed", first, records)
	}
	second := parseStats(t, sp.mustRun(t, 0, "consume", q))
	if first+second.Processed != records || second.Duplicates != 0 {
		t.Fatalf("%d then %+v: want %d records processed once", first, second, records)
	}
	if n := l.count(t, `SELECT COUNT(*) FROM %[1]s`); n != records {
		t.Fatalf("%d processed rows, want %d", n, records)
	}
	if got := stageNames(t, q, done); !slices.Equal(got, []string{"feed.jsonl", "feed.jsonl.done"}) {
		t.Fatalf("done/ holds %q, want the file and its one done-file", got)
	}
	sp.checkFsck(t, q)
}

// TestBatchDeadLetterResumeAnyRun: the dead letter a killed run wrote and
// did not record is found by whichever run reads its record next: one
// that resumes with a smaller batch, whose first commit comes before that
// record (CI's kill storm once left a second copy so), and one after a
// run killed before any commit of its own, which left no progress.
func TestBatchDeadLetterResumeAnyRun(t *testing.T) {
	t.Parallel()
	header := "msg_id,order_no,seq,amount\n"
	rows := []string{"a1,o,1,1.00\n", "a2,o,2,2.00\n", "a3,o,3,3.00\n", "a4,o,4\n", "a5,o,5,5.00\n"}
	for _, tc := range []struct {
		name     string
		progress bool // the killed run committed a1
		want     consumeStats
	}{
		{"first commit before it", true, consumeStats{Processed: 4, DeadLetters: 1}},
		{"no commit before the kill", false, consumeStats{Processed: 4, DeadLetters: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := batchQueue(t, `{"format": "csv"}`)
			mustRun(t, 0, "consume", q) // makes the ledger's tables
			data := header
			for _, r := range rows {
				data += r
			}
			putBytes(t, q, "orders.csv", []byte(data))
			// The killed run's dead letter of a4 (line 5), written, not recorded.
			putBytes(t, q, "orders~L5.csv", []byte(header+rows[3]))
			if err := os.Rename(filepath.Join(q, inbox, "orders~L5.csv"), filepath.Join(q, errorStage, "orders~L5.csv")); err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if tc.progress {
				var st syscall.Stat_t
				if err := syscall.Stat(filepath.Join(q, inbox, "orders.csv"), &st); err != nil {
					t.Fatal(err)
				}
				fileID := fmt.Sprintf("orders.csv:%d:%d:%d", st.Ino, st.Size, time.Unix(st.Mtim.Unix()).UnixNano())
				execLedger(t, filepath.Join(q, "ledger.db"), `INSERT INTO spool_batch_progress (file, batch, position, at) VALUES ('`+
					fileID+`', 'killed-run', '`+fmt.Sprintf("1:%d:3", len(header)+len(rows[0]))+`', '2026-01-01T00:00:00.000000Z')`)
				want.Processed-- // a1 was, before the kill
			}
			// A batch of one: the run commits a record before it reads a4.
			r := mustRun(t, 0, "consume", q, "--batch", "1")
			if got := parseStats(t, r); got != want {
				t.Fatalf("%+v, want %+v\n%s", got, want, r)
			}
			if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"orders~L5.csv"}) {
				t.Fatalf("error/ holds %q, want the one dead letter the killed run wrote", got)
			}
			if n := queryLedger(t, filepath.Join(q, "ledger.db"), `SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter' AND file = 'orders~L5.csv'`); n != 1 {
				t.Fatal("the dead letter is not recorded under the killed run's file")
			}
		})
	}
}
