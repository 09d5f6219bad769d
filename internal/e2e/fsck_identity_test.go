package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fsck against a queue whose identity is wrong or missing: another
// queue's ledger, a queue ID lost, with or without unknown files.

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
