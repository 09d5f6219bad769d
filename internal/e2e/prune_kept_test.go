//go:build linux

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestPruneKeepsFilesFsckKnows: prune without --files says what it leaves
// in done/; fsck then calls none of those files' rows lost (exit 0, an
// informational kept-after-prune), --repair records none of them again,
// a row lost after the prune is still found, and prune --files removes
// the kept files.
func TestPruneKeepsFilesFsckKnows(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	path := filepath.Join(q, "ledger.db")
	mustRun(t, 0, "init", q)
	const old = 12
	putMessages(t, q, 0, old, 0)
	requireStats(t, "old", mustRun(t, 0, "consume", q), consumeStats{Processed: old})
	ageRows(t, path)

	r := mustRun(t, 0, "prune", q, "--older-than", "30d")
	want := fmt.Sprintf("kept %d files in done/ ", old)
	if !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "--files removes them") {
		t.Errorf("prune without --files printed %q, want %q and how to remove them", r.stdout, want)
	}
	requireFindings(t, "fsck after prune", fsck(t, 0, q), map[string]int{"kept-after-prune": old})
	r = mustRun(t, 0, "fsck", q, "--repair")
	if strings.Contains(r.stdout, "repaired") {
		t.Errorf("fsck --repair after prune recorded the kept files again:\n%s", r)
	}
	if n := queryLedger(t, path, `SELECT COUNT(*) FROM processed`); n != 0 {
		t.Errorf("%d processed rows after fsck --repair, want the prune's 0", n)
	}

	// A row lost after the prune is still a row lost.
	putMessages(t, q, old, 1, 0)
	requireStats(t, "new", mustRun(t, 0, "consume", q), consumeStats{Processed: 1})
	execLedger(t, path, `DELETE FROM processed`)
	requireFindings(t, "fsck with a row lost after the prune", fsck(t, 1, q),
		map[string]int{"kept-after-prune": old, "done-unrecorded": 1})
	mustRun(t, 0, "fsck", q, "--repair")
	if n := queryLedger(t, path, `SELECT COUNT(*) FROM processed`); n != 1 {
		t.Errorf("%d processed rows after fsck --repair, want the lost one recorded again", n)
	}

	r = mustRun(t, 0, "prune", q, "--older-than", "30d", "--files")
	if !strings.Contains(r.stdout, fmt.Sprintf(" files=%d ", old)) {
		t.Errorf("prune --files after a prune without: %q, want the %d kept files removed", r.stdout, old)
	}
	if n := len(messages(t, q, done)); n != 1 {
		t.Errorf("%d files left in done/, want the new one", n)
	}
	requireFindings(t, "fsck after prune --files", fsck(t, 0, q), nil)
}
