package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spoolq/spool"
)

// TestTurnAcrossHandles: two handles on one ledger file have open file
// descriptions of their own on the turn file, as two processes do: while
// one holds the turn the other's Take waits, and gets it once released.
func TestTurnAcrossHandles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	a, b := &turnFile{path: path + "-turn", mode: 0o600}, &turnFile{path: path + "-turn", mode: 0o600}
	t.Cleanup(func() {
		for _, f := range []*turnFile{a, b} {
			if err := f.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	release := a.Take()
	got := make(chan func())
	go func() { got <- b.Take() }()
	select {
	case <-got:
		t.Fatal("the second handle took the turn while the first held it")
	case <-time.After(100 * time.Millisecond): // not a timing assertion: only a broken lock returns early
	}
	release()
	select {
	case r := <-got:
		r()
	case <-time.After(time.Minute):
		t.Fatal("the second handle never got the turn after it was released")
	}
}

// TestTurnFileLazy: opening a ledger leaves no turn file behind (a report
// that only reads must not add files); the first write creates it with the
// database file's mode.
func TestTurnFileLazy(t *testing.T) {
	db, path := openTemp(t)
	defer db.Close()
	if _, err := os.Stat(path + "-turn"); !os.IsNotExist(err) {
		t.Fatalf("the turn file exists after Open alone (%v)", err)
	}
	if _, err := db.Consumer().Record(context.Background(), []*spool.Delivery{delivery("c1", "m1")}, spool.Work{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path + "-turn")
	if err != nil {
		t.Fatalf("no turn file after a write: %v", err)
	}
	dbi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != dbi.Mode().Perm() {
		t.Errorf("turn file mode %v, want the database's %v", fi.Mode().Perm(), dbi.Mode().Perm())
	}
}

// TestTurnUnavailable: a turn file that cannot be created leaves the
// writers to SQLite's own locking: Take returns at once, writes succeed.
func TestTurnUnavailable(t *testing.T) {
	turn := &turnFile{path: filepath.Join(t.TempDir(), "missing", "ledger.db-turn"), mode: 0o600}
	done := make(chan struct{})
	go func() {
		turn.Take()()
		turn.Take()()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Take waited on a turn file it could not create")
	}
}

// TestTurnThroughSymlink: a ledger opened through a symlink takes its turn
// on the file beside the real database, where SQLite keeps its -wal: a
// process that names the ledger by its real path shares the turn.
func TestTurnThroughSymlink(t *testing.T) {
	db, path := openTemp(t)
	defer db.Close()
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	viaLink, err := Open(context.Background(), link)
	if err != nil {
		t.Fatal(err)
	}
	defer viaLink.Close()
	if _, err := viaLink.Consumer().Record(context.Background(), []*spool.Delivery{delivery("c1", "m1")}, spool.Work{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-turn"); err != nil {
		t.Errorf("no turn file beside the real database after a write through a symlink: %v", err)
	}
	if _, err := os.Lstat(link + "-turn"); !os.IsNotExist(err) {
		t.Errorf("a turn file beside the symlink (%v): its writers would not share a turn with the real path's", err)
	}
}
