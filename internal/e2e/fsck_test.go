package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spool fsck against every kind of damage it names, each inflicted on
// purpose (issue 14, part 2): fsck exits 1 naming it with its count,
// --repair exits 0, a second fsck is clean, and a redelivery after the
// repair is a duplicate where that applies.

// putMessages puts messages first..first+n-1 into inbox/ as m%05d.json;
// every poisonEvery-th one (when > 0) is not JSON.
func putMessages(t *testing.T, q string, first, n, poisonEvery int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		body := orderMessage(fmt.Sprintf("m-%05d", i), fmt.Sprintf("o-%05d", i), 1, "1.00")
		if poisonEvery > 0 && i%poisonEvery == 0 {
			body = "not json"
		}
		putMessage(t, q, fmt.Sprintf("m%05d.json", i), body)
	}
}

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
	first, rest := 200, scale(2800, 800)
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
	half := scale(300, 100)
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

// TestFsckFilesRemovedFromDone: files removed from done/ by hand leave
// processed rows without a file: informational, exit 0, nothing repaired;
// their redeliveries stay duplicates.
func TestFsckFilesRemovedFromDone(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	putMessages(t, q, 0, 10, 0)
	mustRun(t, 0, "consume", q)
	// Another message under a name done/ already holds: it lands in done/
	// as m00002~2.json, and its row, which names m00002.json, has a file.
	putMessage(t, q, "m00002.json", orderMessage("other-2", "o", 1, "1.00"))
	mustRun(t, 0, "consume", q)
	if _, err := os.Lstat(filepath.Join(q, done, "m00002~2.json")); err != nil {
		t.Fatal(err)
	}
	keep := t.TempDir()
	for _, i := range []int{1, 4, 7} {
		name := fmt.Sprintf("m%05d.json", i)
		if err := os.Rename(filepath.Join(q, done, name), filepath.Join(keep, name)); err != nil {
			t.Fatal(err)
		}
	}
	info := map[string]int{"processed-without-file": 3}
	rep := fsck(t, 0, q)
	requireFindings(t, "fsck after removing files from done/", rep, info)
	if f, _ := rep.find("processed-without-file"); !f.Info {
		t.Errorf("processed-without-file is not marked informational: %+v", f)
	}
	before := treeSnapshot(t, q)
	if out := repairThenClean(t, q, info); countPrefix(out, "repaired") != 0 {
		t.Errorf("--repair repaired something for files removed from done/:\n%s", strings.Join(out, "\n"))
	}
	if d := diffSnapshots(before, treeSnapshot(t, q)); len(d) > 0 {
		t.Errorf("--repair changed the queue for informational findings: %q", d)
	}
	mustRun(t, 0, "enqueue", q, filepath.Join(keep, "m00004.json"))
	requireStats(t, "redelivery of a file removed from done/", mustRun(t, 0, "consume", q), consumeStats{Duplicates: 1})
}

// TestFsckErrorDroppedByHand: a file dropped into error/ by hand has no
// dead-letter record. --repair gives it one, reason unknown, which spool
// errors shows, and which replay --reason unknown selects.
func TestFsckErrorDroppedByHand(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	putMessages(t, q, 0, 4, 2) // two dead letters with records
	mustRun(t, 0, "consume", q)
	if err := os.WriteFile(filepath.Join(q, errorStage, "dropped.json"), []byte(orderMessage("d-1", "o", 1, "2.00")), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := fsck(t, 1, q)
	requireFindings(t, "fsck after a file was dropped into error/", rep, map[string]int{"error-unrecorded": 1})
	if f, _ := rep.find("error-unrecorded"); !slices.Equal(f.Examples, []string{"error/dropped.json"}) {
		t.Errorf("error-unrecorded examples %q, want error/dropped.json", f.Examples)
	}
	out := repairThenClean(t, q, nil)
	if !slices.Contains(out, "repaired error/dropped.json: recorded as a dead letter with reason unknown") {
		t.Errorf("--repair does not say it recorded error/dropped.json:\n%s", strings.Join(out, "\n"))
	}
	if got := errorsCSV(t, q); got["dropped.json"] != "unknown" || got["m00000.json"] != "parse" || len(got) != 3 {
		t.Errorf("spool errors after the repair: %v, want dropped.json unknown and two parse", got)
	}
	if n := queryLedger(t, filepath.Join(q, "ledger.db"), `SELECT COUNT(*) FROM deliveries
		WHERE outcome = 'dead-letter' AND reason = 'unknown' AND file = 'dropped.json' AND repaired_at IS NOT NULL`); n != 1 {
		t.Errorf("the ledger holds %d repaired dead-letter records of dropped.json, want 1", n)
	}
	r := mustRun(t, 0, "replay", q, "--reason", "unknown")
	if r.stdout != "replayed dropped.json -> inbox/dropped.json\n" {
		t.Errorf("replay --reason unknown: %q", r.stdout)
	}
	requireStats(t, "consume of the replayed file", mustRun(t, 0, "consume", q), consumeStats{Processed: 1})
	requireFindings(t, "fsck at the end", fsck(t, 0, q), nil)
}

// TestFsckDoneInvalid: a file in done/ that no consumer could have put
// there (not a message) is named, and --repair leaves it for the operator:
// exit 1 after --repair too, until it is moved out.
func TestFsckDoneInvalid(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	putMessages(t, q, 0, 3, 0)
	mustRun(t, 0, "consume", q)
	bad := filepath.Join(q, done, "bad.json")
	if err := os.WriteFile(bad, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"done-invalid": 1}
	requireFindings(t, "fsck", fsck(t, 1, q), want)
	before := treeSnapshot(t, q)
	requireFindings(t, "fsck --repair", fsck(t, 1, q, "--repair"), want)
	if d := diffSnapshots(before, treeSnapshot(t, q)); len(d) > 0 {
		t.Errorf("--repair changed the queue for an invalid file in done/: %q", d)
	}
	// The operator moves it to error/, where it is a dead letter to record.
	if err := os.Rename(bad, filepath.Join(q, errorStage, "bad.json")); err != nil {
		t.Fatal(err)
	}
	requireFindings(t, "fsck after the move", fsck(t, 1, q), map[string]int{"error-unrecorded": 1})
	repairThenClean(t, q, nil)
}

// TestFsckDeadClaims: a consumer SIGKILLed while its handler works leaves
// its claims in processing/. fsck names them (while the handler, its child,
// still runs: it must not keep the session looking alive); --repair
// recovers them to inbox/, and they are consumed once.
func TestFsckDeadClaims(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	putMessages(t, q, 0, 5, 0)
	gate := filepath.Join(state, "go")
	started := filepath.Join(state, "started")
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o644) })
	p := start(t, "consume", q, "--exec", "touch "+shellQuote(started)+"; while [ ! -e "+shellQuote(gate)+" ]; do sleep 0.02; done")
	waitFor(t, cmdTimeout, "the handler to start", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	if !p.killAfter(t, 0) {
		t.Fatalf("the consumer exited before the kill\n%s", p.result())
	}
	claims := countClaims(t, q)
	if claims == 0 {
		t.Fatal("the killed consumer left no claim in processing/")
	}
	rep := fsck(t, 1, q)
	requireFindings(t, "fsck with the killed consumer's handler still running", rep, map[string]int{"dead-claims": claims})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := repairThenClean(t, q, nil)
	if want := fmt.Sprintf("repaired processing/: recovered %d claims of dead consumers", claims); !slices.Contains(out, want) {
		t.Errorf("--repair does not say %q:\n%s", want, strings.Join(out, "\n"))
	}
	requireEmpty(t, q, processing)
	if n := countNames(t, q, inbox); n != 5 {
		t.Errorf("inbox/ holds %d messages after the recovery, want 5", n)
	}
	requireStats(t, "consume after the recovery", mustRun(t, 0, "consume", q), consumeStats{Processed: 5})
}

// TestFsckStaleTempFiles: temp files of killed writers, in the queue
// directory and its stages, and a directory of a consumer killed while
// joining: the stale ones are named, counted by status, and removed by
// --repair; one whose writer still holds its lock, and one younger than
// the safe age, are left alone, whatever their age.
func TestFsckStaleTempFiles(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	old := time.Now().Add(-time.Hour)
	mk := func(rel string, dir bool) string {
		p := filepath.Join(q, rel)
		var err error
		if dir {
			err = os.Mkdir(p, 0o755)
		} else {
			err = os.WriteFile(p, []byte(`{"msg_id":"half-writ`), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale := []string{"inbox/.spool-tmp-a", "done/.spool-tmp-b", "error/.spool-tmp-c", ".spool-tmp-d"}
	for _, rel := range stale {
		if err := os.Chtimes(mk(rel, false), old, old); err != nil {
			t.Fatal(err)
		}
	}
	join := mk(".join-deadbeef", true)
	if err := os.Chtimes(join, old, old); err != nil {
		t.Fatal(err)
	}
	stale = append(stale, ".join-deadbeef")
	// A live writer: an old file whose lock is held.
	live := mk("inbox/.spool-tmp-live", false)
	lf, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(live, old, old); err != nil {
		t.Fatal(err)
	}
	young := mk("inbox/.spool-tmp-young", false)

	rep := fsck(t, 1, q)
	requireFindings(t, "fsck with stale temp files", rep, map[string]int{"temp-files": len(stale)})
	f, _ := rep.find("temp-files")
	ex := slices.Clone(f.Examples)
	slices.Sort(ex)
	want := slices.Clone(stale)
	slices.Sort(want)
	if !slices.Equal(ex, want) {
		t.Errorf("temp-files examples %q, want %q", ex, want)
	}
	if !strings.Contains(f.Text, "and 2 being written now") {
		t.Errorf("temp-files does not count the 2 being written: %q", f.Text)
	}
	if r := mustRun(t, 0, "status", q); !strings.Contains(r.stdout, "temp files  7 (5 stale") {
		t.Errorf("status does not count the temp files:\n%s", r.stdout)
	}
	out := repairThenClean(t, q, nil)
	if n := countContains(out, "removed a stale temp file"); n != len(stale) {
		t.Errorf("--repair removed %d temp files, want %d:\n%s", n, len(stale), strings.Join(out, "\n"))
	}
	for _, rel := range stale {
		if _, err := os.Lstat(filepath.Join(q, rel)); !os.IsNotExist(err) {
			t.Errorf("%s was not removed: %v", rel, err)
		}
	}
	for _, p := range []string{live, young} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s, not stale, was removed: %v", p, err)
		}
	}

	// The writer dies: its file is stale now, and consume removes it, as
	// enqueue does, saying so.
	lf.Close()
	putMessages(t, q, 0, 1, 0)
	r := mustRun(t, 0, "consume", q)
	if _, err := os.Lstat(live); !os.IsNotExist(err) {
		t.Errorf("consume did not remove the stale %s: %v", live, err)
	}
	if !strings.Contains(r.stderr, "inbox/.spool-tmp-live") {
		t.Errorf("consume does not say it removed inbox/.spool-tmp-live:\n%s", r)
	}
	if err := os.Chtimes(young, old, old); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "n.json")
	if err := os.WriteFile(src, []byte(orderMessage("n-1", "o", 1, "1.00")), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, "enqueue", q, src)
	if _, err := os.Lstat(young); !os.IsNotExist(err) {
		t.Errorf("enqueue did not remove the stale %s: %v", young, err)
	}
	requireFindings(t, "fsck at the end", fsck(t, 0, q), nil)
}

// TestFsckOtherQueue: a ledger that belongs to another queue is named and
// nothing else is checked or repaired: exit 1, after --repair too, with
// nothing changed.
func TestFsckOtherQueue(t *testing.T) {
	t.Parallel()
	q := consumedQueue(t)
	if err := os.WriteFile(filepath.Join(q, "queue.id"), []byte(strings.Repeat("ab", 16)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	putMessage(t, q, "x.json", "not json")
	if err := os.WriteFile(filepath.Join(q, errorStage, "dropped.json"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"other-queue": 1}
	before := treeSnapshot(t, q)
	requireFindings(t, "fsck", fsck(t, 1, q), want)
	requireFindings(t, "fsck --repair", fsck(t, 1, q, "--repair"), want)
	if d := diffSnapshots(before, treeSnapshot(t, q)); len(d) > 0 {
		t.Errorf("fsck --repair of another queue's ledger changed: %q", d)
	}
	requireRefusal(t, run(t, "consume", q), before, []string{q}, "ledger belongs to another queue")
}

// TestFsckNoQueueID: queue.id removed by hand while the ledger knows its
// queue. Consuming is refused; --repair writes the ledger's identity back,
// since the ledger knows every file; a second --repair finds nothing to do.
func TestFsckNoQueueID(t *testing.T) {
	t.Parallel()
	q := consumedQueue(t)
	id := readID(t, q)
	if err := os.Remove(filepath.Join(q, "queue.id")); err != nil {
		t.Fatal(err)
	}
	redeliver(t, q, "m.json")
	before := treeSnapshot(t, q)
	requireRefusal(t, run(t, "consume", q), before, []string{q}, "has no queue.id", "spool fsck "+q+" --repair")
	requireFindings(t, "fsck", fsck(t, 1, q), map[string]int{"no-queue-id": 1})
	out := repairThenClean(t, q, nil)
	if want := "repaired queue.id: wrote the ledger's queue identity " + id + " back"; !slices.Contains(out, want) {
		t.Errorf("--repair does not say %q:\n%s", want, strings.Join(out, "\n"))
	}
	if got := readID(t, q); got != id {
		t.Errorf("queue.id holds %q after the repair, want %q", got, id)
	}
	requireStats(t, "consume after the repair", mustRun(t, 0, "consume", q), consumeStats{Duplicates: 1})
}

// TestFsckNoQueueIDUnknownFiles: queue.id missing, and the ledger, which
// belongs to a queue, does not know every file: this may be another queue
// that lost its identity, pointed at the wrong ledger. --repair must not
// guess: it neither writes the identity nor records the unknown files into
// that ledger, however often it runs.
func TestFsckNoQueueIDUnknownFiles(t *testing.T) {
	t.Parallel()
	q := consumedQueue(t)
	path := filepath.Join(q, "ledger.db")
	id := readID(t, q)
	if err := os.Remove(filepath.Join(q, "queue.id")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(q, done, "stranger.json"), []byte(orderMessage("s-1", "o", 1, "1.00")), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := queryLedger(t, path, `SELECT COUNT(*) FROM processed`)
	for i := range 2 {
		rep := fsck(t, 1, q, "--repair")
		if n := rep.kinds()["no-queue-id"]; n != 1 {
			t.Errorf("--repair #%d: no-queue-id %d, want 1 (%v)", i+1, n, rep.kinds())
		}
		if got := readID(t, q); got != "" {
			t.Fatalf("--repair #%d wrote queue.id %q though the ledger did not know done/stranger.json", i+1, got)
		}
		if n := queryLedger(t, path, `SELECT COUNT(*) FROM processed`); n != rows {
			t.Errorf("--repair #%d recorded files of a queue of doubtful identity: processed holds %d rows, was %d", i+1, n, rows)
		}
		if len(rep.Repairs) != 1 || !strings.HasPrefix(rep.Repairs[0], "not repaired: queue.id is missing") {
			t.Errorf("--repair #%d: repairs %q, want one line saying why nothing was repaired", i+1, rep.Repairs)
		}
	}
	// The operator says which queue it is: the rest is repaired.
	if err := os.WriteFile(filepath.Join(q, "queue.id"), []byte(id+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := repairThenClean(t, q, nil)
	if !slices.Contains(out, "repaired done/stranger.json: recorded as processed (msg_id s-1)") {
		t.Errorf("--repair after queue.id was written back:\n%s", strings.Join(out, "\n"))
	}
}

// TestFsckInterruptedReplay: replays killed at each step, the state built
// by hand as a killed run leaves it (the crash test kills real runs). A
// pending intent with one file staged, one still under its name and one
// removed by hand; a staged intent with one file already in inbox/ and
// two still staged. fsck names both; --repair finishes them forward:
// every file that still exists reaches inbox/ with one replay record.
func TestFsckInterruptedReplay(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	path := filepath.Join(q, "ledger.db")
	mustRun(t, 0, "init", q)
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		putMessage(t, q, n+".json", "not json")
	}
	requireStats(t, "poison", mustRun(t, 0, "consume", q), consumeStats{DeadLetters: 6})
	ino := map[string]uint64{}
	for _, f := range messages(t, q, errorStage) {
		ino[f.Name] = f.Ino
	}
	now := time.Now().UTC().Format(ledgerTime)
	item := func(id, idx int, name string) string {
		return fmt.Sprintf(`INSERT INTO replay_items (intent_id, idx, file, ino) VALUES (%d, %d, '%s', %d)`, id, idx, name, ino[name])
	}
	execLedger(t, path,
		`INSERT INTO replay_intents (id, by_user, note, created_at, state) VALUES (1, 'op', 'pending one', '`+now+`', 'pending')`,
		item(1, 0, "a.json"), item(1, 1, "b.json"), item(1, 2, "c.json"),
		`INSERT INTO replay_intents (id, by_user, note, created_at, state) VALUES (2, 'op', 'staged one', '`+now+`', 'staged')`,
		item(2, 0, "d.json"), item(2, 1, "e.json"), item(2, 2, "f.json"),
	)
	mv := func(from, to string) {
		t.Helper()
		if err := os.Rename(filepath.Join(q, from), filepath.Join(q, to)); err != nil {
			t.Fatal(err)
		}
	}
	mv("error/a.json", "error/.spool-replay-1-0")
	if err := os.Remove(filepath.Join(q, errorStage, "c.json")); err != nil {
		t.Fatal(err)
	}
	mv("error/d.json", "inbox/d.json")
	mv("error/e.json", "error/.spool-replay-2-1")
	mv("error/f.json", "error/.spool-replay-2-2")

	rep := fsck(t, 1, q)
	requireFindings(t, "fsck of two interrupted replays", rep, map[string]int{"interrupted-replay": 2})
	out := repairThenClean(t, q, nil)
	for _, want := range []string{
		"repaired replay 1 by op: finished, 2 of its 3 files replayed",
		"repaired replay 2 by op: finished, 3 of its 3 files replayed",
	} {
		if !slices.Contains(out, want) {
			t.Errorf("--repair does not say %q:\n%s", want, strings.Join(out, "\n"))
		}
	}
	if got, want := names(t, q, inbox), []string{"a.json", "b.json", "d.json", "e.json", "f.json"}; !slices.Equal(got, want) {
		t.Errorf("inbox/ holds %q after the repair, want %q", got, want)
	}
	if got := names(t, q, errorStage); len(got) != 0 {
		t.Errorf("error/ still holds %q", got)
	}
	for n, i := range ino {
		want := 1
		if n == "c.json" {
			want = 0
		}
		if got := queryLedger(t, path, `SELECT COUNT(*) FROM replays WHERE ino = ? AND file = ?`, int64(i), n); got != want {
			t.Errorf("%s has %d replay records, want %d", n, got, want)
		}
	}
	if n := queryLedger(t, path, `SELECT COUNT(*) FROM replay_intents WHERE state = 'done' AND finished_at IS NOT NULL`); n != 2 {
		t.Errorf("%d intents are done, want 2", n)
	}
	// Consumed again, each failed twice and was replayed once between.
	requireStats(t, "consume of the replayed files", mustRun(t, 0, "consume", q), consumeStats{DeadLetters: 5})
	var rows []struct {
		File             string `json:"file"`
		Replays          int    `json:"replays"`
		PreviousFailures int    `json:"previous_failures"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "errors", q, "--json").stdout), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 {
		t.Errorf("errors --json lists %d dead letters, want 5", len(rows))
	}
	for _, r := range rows {
		if r.Replays != 1 || r.PreviousFailures != 1 {
			t.Errorf("%s: replays=%d previous_failures=%d, want 1 and 1", r.File, r.Replays, r.PreviousFailures)
		}
	}
}

// TestFsckInodeReused: the filesystem gives a new file the inode of one
// removed from done/ (ext4 and tmpfs reuse a freed inode at once). A file
// of done/ is not recorded because some processed row carries its inode:
// the row must be its own. Here a.json is processed and removed by hand,
// b.json gets its inode and is processed, and b.json's row is lost: fsck
// must still name b.json, and --repair record it, so that its redelivery
// is a duplicate.
//
// Not parallel: the other tests' new files would take the freed inodes.
func TestFsckInodeReused(t *testing.T) {
	q := filepath.Join(t.TempDir(), "q")
	path := filepath.Join(q, "ledger.db")
	mustRun(t, 0, "init", q)
	const rounds = 10
	for i := range rounds {
		putMessage(t, q, fmt.Sprintf("a%d.json", i), orderMessage(fmt.Sprintf("a-%d", i), "o", 1, "1.00"))
	}
	mustRun(t, 0, "consume", q)
	// Remove a file of done/ and look at once for a new file with its
	// inode, where it was made, under names that are not messages. Other
	// processes on the machine may take the inode first: then again, with
	// the next file.
	var ino uint64
	found, removed := "", 0
	for i := 0; i < rounds && found == ""; i++ {
		a := filepath.Join(q, done, fmt.Sprintf("a%d.json", i))
		ino = statFile(t, a).Ino
		if err := os.Remove(a); err != nil {
			t.Fatal(err)
		}
		removed++
		var tried []string
		for k := 0; k < 200 && found == ""; k++ {
			p := filepath.Join(q, inbox, fmt.Sprintf(".candidate-%d-%d", i, k))
			if err := os.WriteFile(p, []byte(orderMessage("b-1", "o", 2, "2.00")), 0o644); err != nil {
				t.Fatal(err)
			}
			if statFile(t, p).Ino == ino {
				found = p
			} else {
				tried = append(tried, p)
			}
		}
		for _, p := range tried {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if found == "" {
		t.Skipf("the filesystem gave no new file the inode of any of %d files removed", removed)
	}
	t.Logf("a new file got the inode of the file removed from done/ in round %d", removed)
	if err := os.Rename(found, filepath.Join(q, inbox, "b.json")); err != nil {
		t.Fatal(err)
	}
	requireStats(t, "consume b.json", mustRun(t, 0, "consume", q), consumeStats{Processed: 1})
	if got := statFile(t, filepath.Join(q, done, "b.json")).Ino; got != ino {
		t.Fatalf("done/b.json has inode %d, want a.json's %d", got, ino)
	}
	execLedger(t, path, `DELETE FROM processed WHERE msg_id = 'b-1'`)

	rep := fsck(t, 1, q)
	requireFindings(t, "fsck with b.json's row lost", rep, map[string]int{"done-unrecorded": 1, "processed-without-file": removed})
	if f, _ := rep.find("done-unrecorded"); !slices.Equal(f.Examples, []string{"done/b.json"}) {
		t.Errorf("done-unrecorded names %q, want done/b.json", f.Examples)
	}
	repairThenClean(t, q, map[string]int{"processed-without-file": removed})
	redeliver(t, q, "b.json")
	requireStats(t, "redelivery of b.json", mustRun(t, 0, "consume", q), consumeStats{Duplicates: 1})
}

// TestFsckLiveReplay: a replay still running, its intent unfinished and
// its lock held, is not an interrupted one: fsck, from cron beside an
// operator's replay, must not report it. Once its lock is free, it is.
func TestFsckLiveReplay(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	putMessage(t, q, "a.json", "not json")
	mustRun(t, 0, "consume", q)
	ino := statFile(t, filepath.Join(q, errorStage, "a.json")).Ino
	execLedger(t, filepath.Join(q, "ledger.db"),
		`INSERT INTO replay_intents (id, by_user, created_at, state) VALUES (1, 'op', '`+time.Now().UTC().Format(ledgerTime)+`', 'pending')`,
		fmt.Sprintf(`INSERT INTO replay_items (intent_id, idx, file, ino) VALUES (1, 0, 'a.json', %d)`, ino))
	// The replay lock is an flock on error/ itself (queue.Dir.LockReplays).
	lock, err := os.Open(filepath.Join(q, errorStage))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	requireFindings(t, "fsck beside a running replay", fsck(t, 0, q), nil)
	lock.Close()
	requireFindings(t, "fsck once the replay's lock is free", fsck(t, 1, q), map[string]int{"interrupted-replay": 1})
	repairThenClean(t, q, nil)
}
