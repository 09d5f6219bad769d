package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// TestSidecarModes pins down what SQLite does, not what this package adds:
// the -wal and -shm a connection creates get the database file's own
// permissions whatever the umask, because the unix VFS fchmods a new
// sidecar to that mode (robust_open, findCreateFileMode). If a later
// SQLite stopped doing so, checkFiles would have to.
func TestSidecarModes(t *testing.T) {
	for _, umask := range []int{0o022, 0o077, 0o002} {
		for _, mode := range []fs.FileMode{0o640, 0o600, 0o664, 0o644} {
			t.Run(fmt.Sprintf("umask %03o, ledger %04o", umask, mode), func(t *testing.T) {
				path := newLedgerFile(t, mode)
				old := syscall.Umask(umask)
				db, err := Open(t.Context(), path)
				syscall.Umask(old)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				recordOne(t, db)
				for _, side := range []string{path + "-wal", path + "-shm"} {
					if got := modeOf(t, side); got != mode {
						t.Errorf("%s: mode %04o, want the ledger's %04o", filepath.Base(side), got, mode)
					}
				}
			})
		}
	}
}

// TestStaleSidecarMode: a sidecar left by an earlier run with a mode other
// than the ledger's (0444 after a run against a read-only ledger.db, which
// kept the queue blocked once ledger.db was fixed) is put back to the
// ledger's mode on open. SQLite never changes an existing sidecar's mode.
func TestStaleSidecarMode(t *testing.T) {
	for _, stale := range []fs.FileMode{0o444, 0o644, 0o600} {
		t.Run(fmt.Sprintf("%04o", stale), func(t *testing.T) {
			path := newLedgerFile(t, 0o640)
			leaveSidecars(t, path, stale)
			db, err := Open(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			recordOne(t, db)
			for _, side := range []string{path + "-wal", path + "-shm"} {
				if got := modeOf(t, side); got != 0o640 {
					t.Errorf("%s: mode %04o, want the ledger's 0640", filepath.Base(side), got)
				}
			}
		})
	}
}

// TestStaleSidecarOfSymlink: the sidecars are found next to the file a
// symlinked ledger path resolves to, where SQLite keeps them.
func TestStaleSidecarOfSymlink(t *testing.T) {
	real := newLedgerFile(t, 0o600)
	leaveSidecars(t, real, 0o444)
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	db, err := Open(t.Context(), link)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	recordOne(t, db)
	if got := modeOf(t, real+"-shm"); got != 0o600 {
		t.Errorf("-shm: mode %04o, want 0600", got)
	}
}

// TestOpenFileErrors: what SQLite reports as "unable to open database file
// (14)" or "file is not a database (26)" names its cause and the file.
func TestOpenFileErrors(t *testing.T) {
	base := t.TempDir()
	notDB := filepath.Join(base, "notes.txt")
	if err := os.WriteFile(notDB, []byte("not a database\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	zeros := filepath.Join(base, "zeros.db")
	if err := os.WriteFile(zeros, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(base, "fifo.db")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		want error
		msg  string
	}{
		{base, ErrIsDirectory, "ledger " + base + " is a directory"},
		{filepath.Join(base, "no", "x.db"), ErrNoDirectory, "ledger " + filepath.Join(base, "no", "x.db") + ": directory " + filepath.Join(base, "no") + " does not exist"},
		{filepath.Join(base, "no", "such", "x.db"), ErrNoDirectory, ": directory " + filepath.Join(base, "no", "such") + " does not exist"},
		{filepath.Join(notDB, "x.db"), ErrNoDirectory, ": " + notDB + " is not a directory"},
		{notDB, ErrNotDatabase, "ledger " + notDB + " is not an SQLite database (file is not a database (26))"},
		{zeros, ErrNotDatabase, " is not an SQLite database"},
		{fifo, ErrNotDatabase, " is not an SQLite database: a FIFO, not a regular file"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			before := dirListing(t, base)
			db, err := Open(t.Context(), tt.path)
			if err == nil {
				db.Close()
				t.Fatal("opened")
			}
			var fe *FileError
			if !errors.As(err, &fe) || !errors.Is(err, tt.want) {
				t.Errorf("error %v (%T), want a *FileError for %v", err, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
			if after := dirListing(t, base); after != before {
				t.Errorf("the failed open changed %s:\n%s\nthen\n%s", base, before, after)
			}
		})
	}
}

// TestReadOnlyFilesystem: a ledger on a read-only filesystem is refused
// before SQLite opens it read-only and fails at the first write. It mounts
// a tmpfs, so it needs root (which file modes do not bind; EROFS binds
// everyone); elsewhere it skips. The e2e tests cover a read-only ledger
// file and a read-only -shm as an unprivileged user.
func TestReadOnlyFilesystem(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	path := filepath.Join(mnt, "ledger.db")
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	recordOne(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount read-only: %v: %s", err, out)
	}
	defer exec.Command("mount", "-o", "remount,rw", mnt).Run()
	db, err = Open(t.Context(), path)
	if err == nil {
		db.Close()
		t.Fatal("opened a ledger on a read-only filesystem")
	}
	if want := "ledger " + path + " is read-only (read-only filesystem): "; !errors.Is(err, ErrReadOnly) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want ErrReadOnly starting %q", err, want)
	}
	db, err = Open(t.Context(), filepath.Join(mnt, "new.db"))
	if err == nil {
		db.Close()
		t.Fatal("created a ledger on a read-only filesystem")
	}
	if want := "ledger " + mnt + " is read-only (read-only filesystem): cannot create the ledger new.db in it"; !errors.Is(err, ErrReadOnly) || err.Error() != want {
		t.Errorf("error %q, want ErrReadOnly: %q", err, want)
	}
}

func TestFileErrorDescribe(t *testing.T) {
	e := &FileError{Path: "/tmp", Err: ErrIsDirectory, msg: " is a directory"}
	if got := e.Describe("--db /tmp"); got != "--db /tmp is a directory" {
		t.Errorf("Describe = %q", got)
	}
	if got := e.Error(); got != "ledger /tmp is a directory" {
		t.Errorf("Error = %q", got)
	}
}

// newLedgerFile creates a ledger (schema and all, then closed) with mode.
func newLedgerFile(t *testing.T, mode fs.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// leaveSidecars puts the -wal and -shm files a killed process leaves
// behind next to a closed ledger: an empty WAL and a zeroed index, which
// SQLite rebuilds, with the given mode.
func leaveSidecars(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	for side, size := range map[string]int{path + "-wal": 0, path + "-shm": 32 << 10} {
		if err := os.WriteFile(side, make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(side, mode); err != nil {
			t.Fatal(err)
		}
	}
}

// recordOne records a delivery, so that the WAL has been written.
func recordOne(t *testing.T, db *ledger.DB) {
	t.Helper()
	if _, err := db.Consumer().Record(t.Context(), []*spool.Delivery{delivery("c-"+t.Name(), "m-"+t.Name())}, spool.Work{}); err != nil {
		t.Fatal(err)
	}
}

func modeOf(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// dirListing names the entries under dir with their modes.
func dirListing(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %v %d", path, fi.Mode(), fi.Size()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

// TestReadOnlyWALWithoutShm: a writer killed after creating the -wal and
// before the -shm leaves commits in the -wal only. A report (read-only)
// reads them, SQLite rebuilding the -shm, rather than refusing the ledger
// or reading the file alone (immutable), which would not see them.
func TestReadOnlyWALWithoutShm(t *testing.T) {
	path := newLedgerFile(t, 0o644)
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	recordOne(t, db)
	// What a kill -9 leaves, taken while the writer holds the ledger open
	// (a clean close would checkpoint the -wal into the file).
	dir := t.TempDir()
	for _, side := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + side)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "ledger.db"+side), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ro, err := OpenWith(t.Context(), filepath.Join(dir, "ledger.db"), Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a ledger with a -wal and no -shm: %v", err)
	}
	defer ro.Close()
	ids, err := ro.Messages().ProcessedIDs(t.Context(), []string{"m-" + t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	if !ids["m-"+t.Name()] {
		t.Errorf("the read-only ledger does not see the commit in the -wal")
	}
}

// TestReadOnlyOlderSchema: a reader does not migrate: a ledger whose last
// migration is not applied yet (a spool upgraded, no consumer run since)
// is refused with what to run, and nothing else on the line.
func TestReadOnlyOlderSchema(t *testing.T) {
	path := newLedgerFile(t, 0o644)
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().ExecContext(t.Context(), `DELETE FROM schema_migrations WHERE version = (SELECT MAX(version) FROM schema_migrations)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenWith(t.Context(), path, Options{ReadOnly: true, MustExist: true})
	if err == nil {
		ro.Close()
		t.Fatal("a reader opened a ledger of an older schema")
	}
	if msg := err.Error(); !strings.HasSuffix(msg, "a reader does not migrate it: run a consumer or fsck --repair first") {
		t.Errorf("refusal: %q, want it to end with what to run", msg)
	}
}
