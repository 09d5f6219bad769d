package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadOnlyLedger: a ledger file or sidecar spool may not write is
// refused before anything is claimed, naming the file and its mode, with
// exit 2; and a -shm left read-only by an earlier run against a read-only
// ledger.db no longer keeps the queue blocked once ledger.db is fixed.
// Before, the run against the read-only ledger.db claimed a message,
// failed at its first write with "attempt to write a readonly database",
// and left a 0444 ledger.db-shm that failed every later run the same way.
//
// Root is not bound by file modes, so spool runs as nobody (see
// TestUnreadableMessage).
func TestReadOnlyLedger(t *testing.T) {
	t.Parallel()
	as := asNobody(t)
	q := filepath.Join(as.dir, "q")
	as.mustRun(t, 0, "init", q)
	if err := os.WriteFile(filepath.Join(q, "inbox", "a.json"), []byte(`{"msg_id":"m-a","order_no":"O","seq":1,"amount":"1.00"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	as.chown(t, q)
	db := filepath.Join(q, "ledger.db")
	refused := func(t *testing.T, want string) {
		t.Helper()
		before, ledgerBefore := snapshot(t, q), ledgerFiles(t, q)
		r := as.run(t, "consume", q)
		if r.code != 2 || r.stdout != "" {
			t.Errorf("want exit 2 and no summary\n%s", r)
		}
		if lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "spool: consume: "+want) {
			t.Errorf("stderr %q: want one line starting %q", r.stderr, "spool: consume: "+want)
		}
		if diffs := diffSnapshots(before, snapshot(t, q)); len(diffs) > 0 {
			t.Errorf("the refused consume changed the queue: %s", strings.Join(head(diffs, 10), "; "))
		}
		if after := ledgerFiles(t, q); after != ledgerBefore {
			t.Errorf("the refused consume changed the ledger files:\n%s\nthen\n%s", ledgerBefore, after)
		}
	}

	t.Run("ledger.db of another user", func(t *testing.T) {
		if err := os.Lchown(db, 0, 0); err != nil {
			t.Fatal(err)
		}
		refused(t, fmt.Sprintf("ledger %s is read-only to uid %d (mode 0644, owner uid 0): ", db, nobody))
		if err := os.Lchown(db, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("read-only ledger.db", func(t *testing.T) {
		if err := os.Chmod(db, 0o444); err != nil {
			t.Fatal(err)
		}
		refused(t, "ledger "+db+" is read-only (mode 0444): ")
	})

	// What the read-only run used to leave: a -wal and a -shm with the
	// read-only ledger's mode, both nobody's.
	for side, size := range map[string]int{db + "-wal": 0, db + "-shm": 32 << 10} {
		if err := os.WriteFile(side, make([]byte, size), 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(side, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("stale sidecar of another user", func(t *testing.T) {
		// Not nobody's to chmod: named, and left alone.
		if err := os.Lchown(db+"-shm", 0, 0); err != nil {
			t.Fatal(err)
		}
		refused(t, "ledger "+db+"-shm is read-only (mode 0444): make it writable like "+db+" (0644)")
		if err := os.Lchown(db+"-shm", nobody, nobody); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("stale sidecars of our own", func(t *testing.T) {
		r := as.mustRun(t, 0, "consume", q)
		if got, want := parseStats(t, r), (consumeStats{Processed: 1}); got != want {
			t.Errorf("consume: %+v, want %+v", got, want)
		}
		for _, side := range []string{db + "-wal", db + "-shm"} {
			if fi, err := os.Stat(side); err == nil && fi.Mode().Perm() != 0o644 {
				t.Errorf("%s left with mode %04o, want the ledger's 0644", side, fi.Mode().Perm())
			}
		}
	})
}
