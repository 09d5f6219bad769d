package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/testenv"
)

// spool fsck against every kind of damage it names, each inflicted on
// purpose: fsck exits 1 naming it with its count, --repair exits 0, a
// second fsck is clean, and a redelivery after the repair is a duplicate
// where that applies. Here the helpers and damage to the ledger file;
// damage to the queue's files in fsck_files_test.go, to its identity in
// fsck_identity_test.go, and interrupted replays in fsck_replay_test.go.

// msgIDsIn returns the msg_id of every valid message of a stage, by name.
func msgIDsIn(t *testing.T, q, stage string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, f := range messages(t, q, stage) {
		data, err := os.ReadFile(filepath.Join(q, stage, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			MsgID string `json:"msg_id"`
		}
		if json.Unmarshal(data, &m) == nil && m.MsgID != "" {
			ids[f.Name] = m.MsgID
		}
	}
	return ids
}

// unrecordedDone counts the files of done/ whose msg_id has no processed
// row in the ledger at path, and returns one of them.
func unrecordedDone(t *testing.T, q, path string) (int, string) {
	t.Helper()
	db := openLedgerRW(t, path)
	n, example := 0, ""
	for name, id := range msgIDsIn(t, q, done) {
		var k int
		if err := db.QueryRow(`SELECT COUNT(*) FROM processed WHERE msg_id = ?`, id).Scan(&k); err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			n++
			example = name
		}
	}
	db.Close()
	return n, example
}

// unrecordedErrors counts the files of error/ with no dead-letter record,
// by the errors report: those it knows nothing of, not even a time.
func unrecordedErrors(t *testing.T, q string) int {
	t.Helper()
	var rows []struct {
		File string  `json:"file"`
		At   *string `json:"at"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "errors", q, "--json").stdout), &rows); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rows {
		if r.At == nil {
			n++
		}
	}
	return n
}

// TestFsckWALDeleted: a consumer killed mid-drain, then ledger.db-wal
// deleted by hand: every commit since the last checkpoint is lost, while
// their files sit in done/ and error/. fsck names the loss with its exact
// count; --repair records them again; a redelivery of a message whose row
// was lost is a duplicate.
func TestFsckWALDeleted(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	path := filepath.Join(q, "ledger.db")
	mustRun(t, 0, "init", q)
	first, rest := 200, testenv.Pick(2800, 500)
	putMessages(t, q, 0, first, 10)
	mustRun(t, 0, "consume", q) // a clean exit checkpoints the WAL
	putMessages(t, q, first, rest, 10)

	p := start(t, "consume", q, "--batch", "16")
	target := first + rest/3
	waitFor(t, cmdTimeout, "the consumer to get a third through", func() bool {
		return countNames(t, q, done)+countNames(t, q, errorStage) >= target
	})
	if !p.killAfter(t, 0) {
		t.Fatalf("the consumer finished before the kill\n%s", p.result())
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Fatalf("no WAL after a kill: %v", err)
	}
	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	lostDone, example := unrecordedDone(t, q, path)
	lostErr := unrecordedErrors(t, q)
	claims := countClaims(t, q)
	t.Logf("killed with %d in done/, %d in error/, %d claims; the WAL's loss: %d rows of done/, %d dead letters",
		countNames(t, q, done), countNames(t, q, errorStage), claims, lostDone, lostErr)
	if lostDone == 0 || lostErr == 0 {
		t.Fatalf("deleting the WAL lost nothing: the test inflicts no damage")
	}

	want := map[string]int{"done-unrecorded": lostDone, "error-unrecorded": lostErr}
	if claims > 0 {
		want["dead-claims"] = claims
	}
	requireFindings(t, "fsck after the WAL was deleted", fsck(t, 1, q), want)
	out := repairThenClean(t, q, nil)
	if n := countPrefix(out, "repaired done/"); n != lostDone {
		t.Errorf("--repair said %d lines 'repaired done/...', want %d", n, lostDone)
	}
	if n := queryLedger(t, path, `SELECT COUNT(*) FROM processed WHERE repaired_at IS NOT NULL`); n != lostDone {
		t.Errorf("%d processed rows are marked repaired, want %d", n, lostDone)
	}
	if n := unrecordedErrors(t, q); n != 0 {
		t.Errorf("after --repair, %d files of error/ still have no record", n)
	}
	// Running it again finds nothing more to do.
	if out := mustRun(t, 0, "fsck", q, "--repair"); countPrefix(lines(out.stdout), "repaired") != 0 {
		t.Errorf("a second --repair repaired again:\n%s", out.stdout)
	}

	// The rest drains; a redelivery of a message whose row was lost is a
	// duplicate.
	inboxLeft := countNames(t, q, inbox)
	st := parseStats(t, mustRun(t, 0, "consume", q))
	if st.Processed+st.DeadLetters != inboxLeft || st.Duplicates != 0 {
		t.Errorf("draining the rest: %+v, want %d processed or dead letters and no duplicate", st, inboxLeft)
	}
	redeliver(t, q, example)
	requireStats(t, "consume of a redelivery whose row was lost", mustRun(t, 0, "consume", q), consumeStats{Duplicates: 1})
	requireFindings(t, "fsck at the end", fsck(t, 0, q), nil)
}

func countPrefix(ls []string, prefix string) int {
	n := 0
	for _, l := range ls {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// TestFsckRestoredOlderLedger: the ledger restored from a copy taken after
// half the messages: the other half's rows are missing, a duplicate record
// among them. fsck counts exactly those files; --repair records each again
// (the twice-delivered msg_id once processed, once a duplicate).
func TestFsckRestoredOlderLedger(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	path := filepath.Join(q, "ledger.db")
	mustRun(t, 0, "init", q)
	half := testenv.Pick(300, 100)
	putMessages(t, q, 0, half, 0)
	mustRun(t, 0, "consume", q)
	copyDir := t.TempDir()
	copied := map[string]bool{}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		data, err := os.ReadFile(path + suffix)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		copied[suffix] = true
		if err := os.WriteFile(filepath.Join(copyDir, "ledger.db"+suffix), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	putMessages(t, q, half, half, 0)
	// A message of the second half delivered twice, and one of the first.
	putMessage(t, q, "again.json", orderMessage(fmt.Sprintf("m-%05d", half), "o", 1, "1.00"))
	putMessage(t, q, "old.json", orderMessage("m-00000", "o", 1, "1.00"))
	requireStats(t, "second half", mustRun(t, 0, "consume", q), consumeStats{Processed: half, Duplicates: 2})

	// Restore: the copy's files, and no -wal or -shm of the newer ledger.
	removeLedgerFiles(t, path)
	for suffix := range copied {
		data, err := os.ReadFile(filepath.Join(copyDir, "ledger.db"+suffix))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+suffix, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// old.json's msg_id has its processed row in the old copy: only its
	// duplicate record is lost, and a duplicate needs none to stay one.
	rep := fsck(t, 1, q)
	requireFindings(t, "fsck of a restored ledger", rep, map[string]int{"done-unrecorded": half + 1})
	if f, _ := rep.find("done-unrecorded"); len(f.Examples) == 0 || !strings.HasPrefix(f.Examples[0], "done/") {
		t.Errorf("done-unrecorded names no example in done/: %+v", f)
	}
	out := repairThenClean(t, q, nil)
	if p, d := countPrefix(out, "repaired done/"), countContains(out, "recorded as duplicate"); p != half+1 || d != 1 {
		t.Errorf("--repair: %d files recorded, %d of them as duplicates; want %d and 1\n%s", p, d, half+1, strings.Join(out, "\n"))
	}
	if n := queryLedger(t, path, `SELECT COUNT(*) FROM processed`); n != 2*half {
		t.Errorf("processed holds %d rows after the repair, want %d", n, 2*half)
	}
	redeliver(t, q, fmt.Sprintf("m%05d.json", 2*half-1))
	redeliver(t, q, fmt.Sprintf("m%05d.json", 0))
	requireStats(t, "redeliveries after the repair", mustRun(t, 0, "consume", q), consumeStats{Duplicates: 2})
}

func countContains(ls []string, s string) int {
	n := 0
	for _, l := range ls {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}
