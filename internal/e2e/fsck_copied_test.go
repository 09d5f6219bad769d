//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFsckCopiedQueue: fsck of a consumed queue copied with cp -a (every
// file a new inode, the ledger and queue.id copied along) reports no
// processed row without its file and no dead letter without its record,
// but one line saying the queue was copied; --repair records nothing;
// a file really removed from the copy's done/ is still reported, alone.
func TestFsckCopiedQueue(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	q := filepath.Join(base, "q")
	mustRun(t, 0, "init", q)
	for _, id := range []string{"a", "b", "c"} {
		putMessage(t, q, id+".json", metricsMessage(id, "1.00"))
	}
	putMessage(t, q, "bad.json", "nope")
	mustRun(t, 0, "consume", q)
	putMessage(t, q, "waiting.json", metricsMessage("w", "1.00"))
	mustRun(t, 0, "fsck", q)

	cp := filepath.Join(base, "copy")
	if out, err := exec.Command("cp", "-a", q, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v\n%s", err, out)
	}
	r := run(t, "fsck", cp)
	if r.code != 0 {
		t.Errorf("fsck of a cp -a copy: want exit 0 (nothing is missing)\n%s", r)
	}
	for _, bad := range []string{"processed-without-file", "error-unrecorded", "done-unrecorded"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("fsck of a cp -a copy reports %s, but every file is there:\n%s", bad, r.stdout)
		}
	}
	if n := strings.Count(r.stdout, "the queue was copied"); n != 1 {
		t.Errorf("fsck of a cp -a copy: want one line saying the queue was copied, got %d:\n%s", n, r.stdout)
	}
	ledger := filepath.Join(cp, "ledger.db")
	const deadLetters = `SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter'`
	before := queryLedger(t, ledger, deadLetters)
	rep := run(t, "fsck", cp, "--repair")
	if rep.code != 0 || strings.Contains(rep.stdout, "repaired") {
		t.Errorf("fsck --repair of a cp -a copy repaired something, but nothing is missing\n%s", rep)
	}
	if after := queryLedger(t, ledger, deadLetters); after != before {
		t.Errorf("fsck --repair of the copy recorded %d dead letters more", after-before)
	}

	// A file truly gone is still reported, and only it.
	if err := os.Remove(filepath.Join(cp, done, "b.json")); err != nil {
		t.Fatal(err)
	}
	r = run(t, "fsck", cp)
	if !strings.Contains(r.stdout, "processed-without-file: 1 ") || !strings.Contains(r.stdout, "b.json (msg_id b)") {
		t.Errorf("fsck of the copy with done/b.json removed: want that one row reported\n%s", r)
	}
}
