package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/queue"
)

// fsck against damage to the queue's files: messages removed from done/
// or error/, invalid ones in done/, dead consumers' claims, stale temp
// files and a reused inode.

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
	before := snapshotButAudit(t, q)
	if out := repairThenClean(t, q, info); countPrefix(out, "repaired") != 0 {
		t.Errorf("--repair repaired something for files removed from done/:\n%s", strings.Join(out, "\n"))
	}
	if d := changedButAudit(before, snapshotButAudit(t, q)); len(d) > 0 {
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
	before := snapshotButAudit(t, q)
	requireFindings(t, "fsck --repair", fsck(t, 1, q, "--repair"), want)
	if d := changedButAudit(before, snapshotButAudit(t, q)); len(d) > 0 {
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
// recovers them to inbox/, releases the session's reservations once its
// calls lock is free, and they are consumed once.
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
	// The repair releases the reservations once no process of the calls
	// holds the lock: the handlers see the gate within 20 ms, but on a
	// busy machine they may take longer to exit.
	waitCallsGone(t, q)
	out := repairThenClean(t, q, nil)
	if want := fmt.Sprintf("repaired processing/: recovered %d claims of dead consumers", claims); !slices.Contains(out, want) {
		t.Errorf("--repair does not say %q:\n%s", want, strings.Join(out, "\n"))
	}
	// The handler's processes are gone: their calls lock is free, and
	// the killed session's reservations are released with that proof.
	if !slices.ContainsFunc(out, func(l string) bool {
		return strings.HasPrefix(l, "repaired reservations: released the ") && strings.HasSuffix(l, ", whose calls lock is free (no process of its calls is left)")
	}) {
		t.Errorf("--repair does not release the killed session's reservations:\n%s", strings.Join(out, "\n"))
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

// waitCallsGone waits until no calls lock of the queue at q is held by a
// process of a dead session's calls (queue.Dir.ProbeCalls).
func waitCallsGone(t *testing.T, q string) {
	t.Helper()
	d, err := queue.Open(q)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	waitFor(t, cmdTimeout, "the killed consumer's handlers to exit", func() bool {
		names, err := os.ReadDir(filepath.Join(q, queue.CallsLockDir))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			st, err := d.ProbeCalls(n.Name())
			if err != nil {
				t.Fatal(err)
			}
			if st == queue.CallsRunning {
				return false
			}
		}
		return true
	})
}
