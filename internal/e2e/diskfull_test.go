//go:build linux

package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestDiskFull: a consumer that runs out of space fails the run with one
// clear line and a runtime-failure status, and loses nothing: once space is
// freed, the next run recovers what it left and finishes every message.
// It mounts a small tmpfs, so it needs root; elsewhere it skips.
func TestDiskFull(t *testing.T) {
	mnt := smallFS(t)
	q := filepath.Join(mnt, "q")
	mustRun(t, 0, "init", q)
	const n = 120
	for i := range n {
		body := fmt.Sprintf(`{"msg_id":"m-%03d","order_no":"O","seq":%d,"amount":"%d.50","note":%q}`, i, i+1, i, strings.Repeat("x", 100))
		if err := os.WriteFile(filepath.Join(q, "inbox", fmt.Sprintf("%03d.json", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Open the ledger while there is room (so the run fails in the middle,
	// not at its start), then fill the disk but for a little room: a few
	// batches commit, then the ledger or a move runs out of space.
	mustRun(t, 0, "dups", q)
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	if err := f.Truncate(mustSize(t, f) - 160<<10); err != nil {
		t.Fatal(err)
	}
	f.Close()

	r := run(t, "consume", q, "--batch", "10")
	if r.code != 3 {
		t.Fatalf("consume on a full disk: want exit 3 (runtime failure)\n%s", r)
	}
	// Log records (a WARN of the claims left for recovery) may come with
	// it; the error itself is one line.
	if lines := notLogged(r.stderr); len(lines) != 1 || !strings.HasPrefix(lines[0], "spool: consume: ") {
		t.Fatalf("want one error line on stderr, got %q", r.stderr)
	}
	t.Logf("full disk after %d of %d messages: %s", countNames(t, q, "done"), n, strings.TrimSpace(r.stderr))
	total := countNames(t, q, "inbox") + countClaims(t, q) + countNames(t, q, "done") + countNames(t, q, "error")
	if total != n {
		t.Fatalf("after the failed run the stages hold %d messages, want %d: something was lost", total, n)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	st := parseStats(t, mustRun(t, 0, "consume", q))
	if st.Processed+st.Duplicates+st.DeadLetters == 0 && countNames(t, q, "done") != n {
		t.Fatalf("the run after freeing space consumed nothing: %+v", st)
	}
	requireEmpty(t, q, "processing")
	if got := countNames(t, q, "done"); got != n {
		t.Fatalf("done/ holds %d, want all %d", got, n)
	}
	db := openLedger(t, q)
	if got := count(t, db, "SELECT COUNT(*) FROM processed"); got != n {
		t.Fatalf("processed holds %d rows, want %d", got, n)
	}
	if got := count(t, db, "SELECT COUNT(*) FROM deliveries WHERE outcome = 'duplicate'"); got != 0 {
		t.Fatalf("%d duplicates: a message became a duplicate of its own interrupted run", got)
	}
}

// smallFS mounts a tmpfs of 3 MiB for the test to fill, and unmounts it
// at the end; without root the test skips.
func smallFS(t *testing.T) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}

// fill writes a file at path until its filesystem is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestDiskFullLedgerOpen: a ledger the disk is too full to open (a
// consumer killed earlier left a 3-byte -shm and an empty -wal, which
// SQLite must grow to 32 KiB before it reads the database) is said to be
// that, with its path, by the reports and by consume (exit 3), never
// "holds no spool ledger", which would steer the operator to init or
// --new-ledger; once space is freed it opens as it was.
func TestDiskFullLedgerOpen(t *testing.T) {
	mnt := smallFS(t)
	q := filepath.Join(mnt, "q")
	mustRun(t, 0, "init", q)
	putMessage(t, q, "a.json", orderMessage("a", "A", 1, "1.00"))
	mustRun(t, 0, "consume", q)
	ledgerPath := filepath.Join(q, "ledger.db")
	if err := os.WriteFile(ledgerPath+"-wal", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ledgerPath+"-shm", []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	fill(t, filler)
	for _, args := range [][]string{{"status", q}, {"tasks", q}, {"dups", q}, {"consume", q}} {
		r := run(t, args...)
		want := "spool: " + args[0] + ": ledger " + ledgerPath + ": disk full"
		if r.code != 3 || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 || strings.Contains(r.stderr, "no spool ledger") {
			t.Errorf("spool %s on a full disk: want exit 3 and one line beginning %q\n%s", args[0], want, r)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if r := mustRun(t, 0, "status", q, "--json"); !strings.Contains(r.stdout, `"processed": 1`) && !strings.Contains(r.stdout, `"processed":1`) {
		t.Errorf("status after freeing space: want the ledger as it was, 1 processed\n%s", r)
	}
}

func mustSize(t *testing.T, f *os.File) int64 {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestDiskFullBatchDeadLetters: a batch file whose bad rows' dead letters
// fill the disk. A chunk's dead letters are written before the commit
// that records them, so the failed run leaves some in error/ without a
// record; fsck calls them pending (the file's resumed run records them),
// not unrecorded, and --repair leaves them alone rather than record them
// as "unknown" beside the resumed run's own. Once there is room the file
// finishes with each bad row one dead letter, recorded with its reason.
func TestDiskFullBatchDeadLetters(t *testing.T) {
	mnt := smallFS(t)
	q := filepath.Join(mnt, "q")
	db := filepath.Join(t.TempDir(), "ledger.db") // the dead letters, not the ledger, fill the disk
	mustRun(t, 0, "init", q, "--format", "csv", "--db", db)
	const n = 2000 // every other row bad: 1 000 one-record files, a page each, over 3 MiB
	data, bad := ordersCSV(n, func(i int) bool { return i%2 == 0 })
	putBytes(t, q, "orders.csv", data)
	r := run(t, "consume", q, "--db", db)
	if r.code != 3 || !strings.Contains(r.stderr, "no space left on device") {
		t.Fatalf("consume on a full disk: want exit 3 and ENOSPC\n%s", r)
	}
	const recorded = `SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter'`
	pending := len(stageNames(t, q, errorStage)) - queryLedger(t, db, recorded)
	if pending <= 0 {
		t.Fatalf("the failed run left no dead letter without its record: the test tries nothing\n%s", r)
	}
	rep := fsck(t, 1, q, "--db", db) // the dead claim
	requireFindings(t, "fsck after the failed run", rep, map[string]int{"dead-claims": 1, "pending-dead-letters": pending})
	if r := mustRun(t, 0, "fsck", q, "--db", db, "--repair"); strings.Contains(r.stdout, "recorded as a dead letter") {
		t.Fatalf("fsck --repair recorded the pending dead letters:\n%s", r)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=64m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	mustRun(t, 0, "consume", q, "--db", db)
	if got := queryLedger(t, db, `SELECT COUNT(*) FROM processed`); got != n-len(bad) {
		t.Fatalf("once there is room: %d processed rows, want %d", got, n-len(bad))
	}
	if got := len(stageNames(t, q, errorStage)); got != len(bad) {
		t.Fatalf("error/ holds %d files, want one for each of the %d bad rows", got, len(bad))
	}
	if got := queryLedger(t, db, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter' AND reason = 'parse'`); got != len(bad) {
		t.Fatalf("%d dead letters recorded with reason parse, want %d", got, len(bad))
	}
	checkFsck(t, q, "--db", db)
}

// TestBatchDeadLetterNoRoom: a record over the record limit whose dead
// letter (the record, whole) does not fit in what is left of the disk,
// as a gzip bomb's line of zeros, sets its batch file aside whole in
// error/ after committing the records before it, with a reason that says
// so, instead of failing every run that takes the file (first by name)
// again; once there is room, spool replay resumes the file at that
// record. With calls too, once the calls before it are settled (they
// take 0.2 s, so the file's failure comes while they are in flight).
func TestBatchDeadLetterNoRoom(t *testing.T) {
	for _, handler := range [][]string{nil, {"--exec", "sleep 0.2; cat >/dev/null"}} {
		t.Run(fmt.Sprint("handler=", handler), func(t *testing.T) {
			mnt := smallFS(t)
			q := filepath.Join(mnt, "q")
			mustRun(t, 0, "init", q, "--format", "jsonl", "--include", "*.jsonl,*.jsonl.gz")
			line := func(id string, seq int, pad string) string {
				return fmt.Sprintf(`{"msg_id":%q,"order_no":"O","seq":%d,"amount":"1.00","pad":%q}`+"\n", id, seq, pad)
			}
			bomb := line("a1", 1, "") + line("a2", 2, "") + line("a3", 3, strings.Repeat("0", 8<<20)) + line("a4", 4, "")
			putBytes(t, q, "a.jsonl.gz", gzipped(t, []byte(bomb)))
			putBytes(t, q, "b.jsonl", []byte(line("b1", 1, "")))
			consume := append([]string{"consume", q}, handler...)
			st := parseStats(t, mustRun(t, 0, consume...))
			if st != (consumeStats{Processed: 3, DeadLetters: 1}) {
				t.Fatalf("%+v, want a1, a2 and b1 processed and a.jsonl.gz set aside", st)
			}
			if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"a.jsonl.gz"}) {
				t.Fatalf("error/ holds %q, want a.jsonl.gz alone", got)
			}
			r := mustRun(t, 0, "errors", q, "--detail")
			if !strings.Contains(r.stdout, "line 3: a record of") || !strings.Contains(r.stdout, "no space left on device") ||
				!strings.Contains(r.stdout, "set aside whole") {
				t.Fatalf("spool errors does not say why a.jsonl.gz is set aside:\n%s", r)
			}
			checkFsck(t, q)

			// Room again: the replayed file resumes at a3.
			if out, err := exec.Command("mount", "-o", "remount,size=64m", mnt).CombinedOutput(); err != nil {
				t.Fatalf("grow the tmpfs: %v: %s", err, out)
			}
			mustRun(t, 0, "replay", q, "a.jsonl.gz")
			st = parseStats(t, mustRun(t, 0, consume...))
			if st != (consumeStats{Processed: 1, DeadLetters: 1}) {
				t.Fatalf("%+v after the replay, want a4 processed and a3 a dead letter: a1 and a2 are not read again", st)
			}
			if got := stageNames(t, q, errorStage); !slices.Equal(got, []string{"a~L3.jsonl"}) {
				t.Fatalf("error/ holds %q, want a~L3.jsonl", got)
			}
			want := int64(len(line("a3", 3, strings.Repeat("0", 8<<20))))
			if fi, err := os.Stat(filepath.Join(q, errorStage, "a~L3.jsonl")); err != nil || fi.Size() != want {
				t.Fatalf("a~L3.jsonl: %v, want the record whole, %d bytes", fi, want)
			}
			if n := queryLedger(t, filepath.Join(q, "ledger.db"), `SELECT COUNT(*) FROM processed`); n != 4 {
				t.Fatalf("%d processed rows, want 4", n)
			}
			checkFsck(t, q)
		})
	}
}
