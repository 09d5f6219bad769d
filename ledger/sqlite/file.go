package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spoolq/spool/queue"
	"golang.org/x/sys/unix"
)

// This file looks at the ledger file and its -wal and -shm sidecars before
// SQLite opens them, because SQLite's own errors do not say what is wrong:
// a directory, a missing directory or an unwritable file are all "unable to
// open database file (14)" or, later and worse, a read-only connection
// that fails at its first write, after a consumer has claimed messages.
//
// What SQLite does with the sidecars' permissions, as the tests check: its
// unix VFS creates the -wal and -shm with the database file's own mode,
// whatever the umask (it fchmods a new, empty file to that mode, and as
// root chowns it to the database file's owner). It never changes the mode
// of a sidecar that exists already. So a -shm made while ledger.db was
// 0444 stays 0444 after ledger.db is made writable again, and every later
// open gets a read-only shared-memory index: "attempt to write a readonly
// database", naming neither file. checkFiles puts such a stale sidecar
// back to the database file's mode when it may, and otherwise names it.

// The problems a *FileError reports; test for them with errors.Is.
var (
	// ErrIsDirectory: the ledger path names a directory.
	ErrIsDirectory = errors.New("is a directory")
	// ErrNoDirectory: the directory the ledger would be created in does
	// not exist, or is not a directory.
	ErrNoDirectory = errors.New("directory does not exist")
	// ErrNotDatabase: the file exists but is not an SQLite database (or
	// not a regular file).
	ErrNotDatabase = errors.New("is not an SQLite database")
	// ErrReadOnly: the ledger file, one of its sidecars, or the directory
	// it would be created in cannot be written by this process; a
	// ledger only read would still fail at its first write.
	ErrReadOnly = errors.New("is read-only")
	// ErrDiskFull: the filesystem of the ledger has no room for what
	// SQLite must write to open it (its -shm, which it grows to 32 KiB
	// before it reads a WAL database) or to use it. Not a ledger that
	// is missing or damaged: free space, and it opens as it was.
	ErrDiskFull = errors.New("disk full")
)

// FileError is a ledger file, a sidecar of it or its directory that SQLite
// cannot use as it is. Err is one of ErrIsDirectory, ErrNoDirectory,
// ErrNotDatabase, ErrReadOnly and ErrDiskFull.
type FileError struct {
	// Path is the file at fault: the ledger path as given, the -wal or
	// -shm file next to it, or the directory it would be created in.
	Path string
	Err  error
	// msg is the problem, phrased to follow the file's name: " is a
	// directory", ": directory /x does not exist".
	msg string
}

func (e *FileError) Error() string { return e.Describe("ledger " + e.Path) }

// Describe is Error with subject in place of "ledger PATH", for a caller
// that names the file otherwise (spool says "--db PATH" for its flag).
func (e *FileError) Describe(subject string) string { return subject + e.msg }

func (e *FileError) Unwrap() error { return e.Err }

// checkFiles looks at the ledger file at path, its sidecars and its
// directory before SQLite opens them: it returns a *FileError for what
// SQLite would fail on without saying why, and puts a stale sidecar whose
// mode differs from the database file's back to that mode when this
// process owns it (or is root). Anything it cannot decide it leaves to
// SQLite.
func checkFiles(path string) error {
	fi, err := os.Stat(path) // SQLite follows a symlinked database file
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return checkDir(path)
	case err != nil:
		return nil // SQLite's error says it as well as we could
	case fi.IsDir():
		return &FileError{Path: path, Err: ErrIsDirectory, msg: " is a directory"}
	case !fi.Mode().IsRegular():
		return &FileError{Path: path, Err: ErrNotDatabase,
			msg: fmt.Sprintf(" is not an SQLite database: a %s, not a regular file", queue.ModeType(fi.Mode()))}
	}
	mode := fi.Mode().Perm()
	if err := writable(path); err != nil {
		return readOnly(path, fi, err, "spool records every delivery in it; make it writable for the user spool runs as")
	}
	// SQLite names the sidecars after the database file's real path.
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil
	}
	// Every sidecar is checked before any is changed, so that a refusal
	// leaves the files as they were.
	var stale []string
	for _, side := range []string{real + "-wal", real + "-shm"} {
		fix, err := checkSidecar(side, path, mode)
		if err != nil {
			return err
		}
		if fix {
			stale = append(stale, side)
		}
	}
	for _, side := range stale {
		// A sidecar left by an earlier run (a crash, or a run against a
		// read-only database file) keeps the mode it was made with;
		// SQLite only ever sets the mode of one it creates.
		if err := os.Chmod(side, mode); err != nil {
			return fmt.Errorf("ledger %s: make its mode the ledger's %04o: %w", side, mode, err)
		}
	}
	return nil
}

// checkDir checks the directory a new ledger file would be created in.
func checkDir(path string) error {
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return &FileError{Path: path, Err: ErrNoDirectory, msg: fmt.Sprintf(": directory %s does not exist", dir)}
	case err != nil:
		return nil
	case !di.IsDir():
		return &FileError{Path: path, Err: ErrNoDirectory, msg: fmt.Sprintf(": %s is not a directory", dir)}
	}
	if err := writable(dir); err != nil {
		return readOnly(dir, di, err, fmt.Sprintf("cannot create the ledger %s in it", filepath.Base(path)))
	}
	return nil
}

// checkSidecar checks one -wal or -shm file of the database file db, whose
// permissions are mode. It reports whether the sidecar's mode is to be set
// to mode (it differs, and this process may change it), or an error when
// the sidecar is not writable and will not be made so.
func checkSidecar(side, db string, mode fs.FileMode) (fix bool, err error) {
	si, err := os.Lstat(side)
	if err != nil || !si.Mode().IsRegular() {
		return false, nil // none (SQLite creates it), or SQLite's to refuse
	}
	if si.Mode().Perm() != mode && mayChmod(si) {
		return true, nil
	}
	if err := writable(side); err != nil {
		return false, readOnly(side, si, err, fmt.Sprintf("make it writable like %s (%04o), or remove it while no spool command runs", db, mode))
	}
	return false, nil
}

// mayChmod reports whether this process may change the mode of the file
// fi describes: it owns the file, or it is root.
func mayChmod(fi fs.FileInfo) bool {
	euid := os.Geteuid()
	st, ok := fi.Sys().(*syscall.Stat_t)
	return euid == 0 || (ok && int(st.Uid) == euid)
}

// writable reports, as an error, whether this process may write the file
// or directory at path: EACCES, or EROFS on a read-only filesystem. Other
// errors are not reported, for SQLite to meet.
func writable(path string) error {
	err := unix.Access(path, unix.W_OK)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EROFS) || errors.Is(err, unix.EPERM) {
		return err
	}
	return nil
}

// readOnly is the *FileError for the file fi at path, which writable
// found this process may not write (err).
func readOnly(path string, fi fs.FileInfo, err error, hint string) *FileError {
	mode := fi.Mode().Perm()
	msg := fmt.Sprintf(" is read-only (mode %04o): %s", mode, hint)
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case errors.Is(err, unix.EROFS):
		msg = fmt.Sprintf(" is read-only (read-only filesystem): %s", hint)
	case mode&0o222 != 0 && ok:
		// Writable, but not by this user: say whose it is.
		msg = fmt.Sprintf(" is read-only to uid %d (mode %04o, owner uid %d): %s", os.Geteuid(), mode, st.Uid, hint)
	}
	return &FileError{Path: path, Err: ErrReadOnly, msg: msg}
}

// openError is the error of opening the ledger at path: a *FileError for
// SQLite's SQLITE_NOTADB (26), which names no file, and for a disk too
// full to open it (diskFull), else err with the operation and the path.
func openError(path string, err error) error {
	var coded interface{ Code() int }
	if errors.As(err, &coded) && coded.Code()&0xff == 26 {
		return &FileError{Path: path, Err: ErrNotDatabase, msg: fmt.Sprintf(" is not an SQLite database (%v)", err)}
	}
	if free, full := diskFull(path, err); full {
		return &FileError{Path: path, Err: ErrDiskFull, msg: fmt.Sprintf(": disk full, %d KiB free on its filesystem (%v). Try: free space there, then run again",
			free>>10, err)}
	}
	return fmt.Errorf("open ledger %s: %w", path, err)
}

// minRoom is the free space under which an I/O error of SQLite's on the
// ledger's filesystem is taken for the disk being full: its -shm grows by
// 32 KiB at a time, and a commit writes a few pages to the -wal.
const minRoom = 256 << 10

// diskFull reports whether err, of SQLite on the ledger at path, is its
// filesystem being full, and how many bytes are free there: SQLITE_FULL
// (13) or ENOSPC says so itself, while SQLite's I/O errors (10: a write,
// an fsync, and SQLITE_IOERR_SHMSIZE, 4874, the -shm it could not grow)
// name no cause, so a filesystem with less than minRoom free (to this
// user) is taken for it.
func diskFull(path string, err error) (uint64, bool) {
	var st unix.Statfs_t
	if serr := unix.Statfs(filepath.Dir(path), &st); serr != nil {
		return 0, false
	}
	free := st.Bavail * uint64(st.Bsize)
	if os.Geteuid() == 0 {
		free = st.Bfree * uint64(st.Bsize) // root may write into the reserved blocks
	}
	var coded interface{ Code() int }
	isCode := func(c int) bool { return errors.As(err, &coded) && coded.Code()&0xff == c }
	const sqliteIOErr, sqliteFull = 10, 13
	switch {
	case errors.Is(err, unix.ENOSPC), isCode(sqliteFull):
		return free, true
	case isCode(sqliteIOErr):
		return free, free < minRoom
	}
	return free, false
}
