//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

var pruneBatchLine = regexp.MustCompile(`^(pruned|would prune) \d+ rows older than \S+: processed=(\d+) deliveries=\d+ files=(\d+) bytes=\d+ batch-files=(\d+)\n$`)

// TestPruneBatchFiles: spool prune forgets the progress of the batch
// files past the window and, with --files, removes them from done/, the
// files whose records were all dead letters and the files of no record
// too (their progress row is their only record); it keeps the progress of
// a file a graceful stop gave back to inbox/, which the next run resumes
// without reading a record twice. status then lists only that file, and
// fsck is clean.
func TestPruneBatchFiles(t *testing.T) {
	t.Parallel()
	q := batchQueue(t, `{"format": "jsonl"}`)
	good, allBad, empty := `{"msg_id":"g1","order_no":"o","seq":1,"amount":"1.00"}`+"\n", `{"msg_id":"b1","order_no":"o","seq":"x","amount":"1.00"}`+"\nnot json\n", "\n"
	putBytes(t, q, "good.jsonl", []byte(good))
	putBytes(t, q, "allbad.jsonl", []byte(allBad))
	putBytes(t, q, "empty.jsonl", []byte(empty))
	mustRun(t, 0, "consume", q)
	if got := stageNames(t, q, done); !slices.Equal(got, []string{"allbad.jsonl", "empty.jsonl", "good.jsonl"}) {
		t.Fatalf("done/ holds %q", got)
	}

	// A feed a graceful stop gives back to inbox/ half read.
	records := testenv.Pick(50_000, 20_000)
	var b bytes.Buffer
	for i := 1; i <= records; i++ {
		fmt.Fprintf(&b, `{"msg_id":"k%d","order_no":"f","seq":%d,"amount":"1.00"}`+"\n", i, i)
	}
	putBytes(t, q, "feed.jsonl", b.Bytes())
	l := sqliteEngine.open(t, q)
	p := spoolAt{bin: spoolBin}.start(t, "consume", q, "--batch", "50")
	waitFor(t, cmdTimeout, "the feed's first records committed", func() bool {
		n, _ := ledgerProcessed(l)
		return n > 1 // g1's, then the feed's
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t)
	if r.code != 0 {
		t.Fatalf("a stopped consumer exited with a failure:\n%s", r)
	}
	first := parseStats(t, r).Processed
	if !slices.Contains(stageNames(t, q, inbox), "feed.jsonl") {
		t.Skipf("the consumer finished the feed (%d records) before its stop", first)
	}

	path := filepath.Join(q, "ledger.db")
	ageRows(t, path)
	old := time.Now().Add(-40 * 24 * time.Hour).UTC().Format("2006-01-02T15:04:05.000000Z")
	execLedger(t, path, `UPDATE spool_batch_progress SET at = '`+old+`'`)
	counts := func(args ...string) []string {
		t.Helper()
		r := mustRun(t, 0, append([]string{"prune", q, "--older-than", "30d", "--files"}, args...)...)
		m := pruneBatchLine.FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("prune printed %q", r.stdout)
		}
		return m[2:]
	}
	// The feed's records committed before the stop go with their rows,
	// as any processed row does; its progress stays.
	want := []string{fmt.Sprint(1 + first), "3", "3"}
	if got := counts("--dry-run"); !slices.Equal(got, want) {
		t.Fatalf("prune --dry-run: processed, files, batch-files = %q, want %q", got, want)
	}
	if got := stageNames(t, q, done); len(got) != 3 {
		t.Fatalf("a dry run removed files: done/ holds %q", got)
	}
	if got := counts(); !slices.Equal(got, want) {
		t.Fatalf("prune: processed, files, batch-files = %q, want %q", got, want)
	}
	if got := stageNames(t, q, done); len(got) != 0 {
		t.Fatalf("done/ holds %q after prune --files, want nothing", got)
	}
	requireAudit(t, path, "prune", []auditRow{{Outcome: "ok", Counts: map[string]int64{
		"processed": int64(1 + first), "deliveries": 0, "files": 3, "bytes": int64(len(good) + len(allBad) + len(empty)), "batch_files": 3}}})
	if n := count(t, l.db, `SELECT COUNT(*) FROM spool_batch_progress WHERE file LIKE 'feed.jsonl:%'`); n != 1 {
		t.Fatalf("the given-back feed has %d progress rows after the prune, want 1", n)
	}
	if n := count(t, l.db, `SELECT COUNT(*) FROM spool_batch_progress`); n != 1 {
		t.Fatalf("%d progress rows after the prune, want the feed's alone", n)
	}
	checkFsck(t, q)

	// Resumed where it stopped: no record read twice.
	second := parseStats(t, mustRun(t, 0, "consume", q))
	if first+second.Processed != records || second.Duplicates != 0 {
		t.Fatalf("%d then %+v: want the %d records processed once, the feed resumed", first, second, records)
	}
	if files := statusBatchFiles(t, spoolAt{bin: spoolBin}, q); len(files) != 1 || files[0].File != "feed.jsonl" {
		t.Errorf("status lists the batch files %+v, want feed.jsonl alone", files)
	}
	checkFsck(t, q)
}
