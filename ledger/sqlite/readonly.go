package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/spoolq/spool/ledger"
)

// openReadOnly opens the ledger at path for reading only (Options.ReadOnly),
// for a report run by a user who may read the queue and its ledger but
// write neither: nothing is created, migrated or changed, and SQLite is
// asked for no lock that needs writing.
//
// A WAL database can be read so when its -wal and -shm exist (a consumer
// runs, or one left them): SQLite then reads the -shm without writing it
// (mode=ro). When they do not (every writer closed cleanly and removed
// them), SQLite could only create them, which the user may not: the file
// is then opened immutable=1, read as it is on disk with no locking, which
// is exact when no writer runs, as there is none without a -wal. A writer
// that starts during a long-lived read (spool serve) is not seen by it.
func openReadOnly(ctx context.Context, path string) (*ledger.DB, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return nil, fmt.Errorf("open ledger %s: %w", path, ledger.ErrNoLedger)
	case err != nil:
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	case fi.IsDir():
		return nil, &FileError{Path: path, Err: ErrIsDirectory, msg: " is a directory"}
	case !fi.Mode().IsRegular():
		return nil, &FileError{Path: path, Err: ErrNotDatabase, msg: " is not an SQLite database: not a regular file"}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &FileError{Path: path, Err: ErrReadOnly, msg: fmt.Sprintf(" cannot be read: %v: give the user spool runs as read access to it", errors.Unwrap(err))}
	}
	var hdr [16]byte
	n, _ := io.ReadFull(f, hdr[:])
	_ = f.Close() // read-only: nothing to lose
	if n > 0 && string(hdr[:n]) != "SQLite format 3\x00"[:n] || n > 0 && n < len(hdr) {
		// What SQLite would say, SQLITE_NOTADB, named as the write path names it.
		return nil, &FileError{Path: path, Err: ErrNotDatabase, msg: " is not an SQLite database (file is not a database (26))"}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	real := abs
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		real = p
	}
	dsn := "file:" + escapePath(filepath.ToSlash(abs)) + "?mode=ro&_pragma=busy_timeout(" + strconv.Itoa(busyTimeout) + ")"
	if _, err := os.Stat(real + "-wal"); err != nil {
		dsn += "&immutable=1"
	} else if _, err := os.Stat(real + "-shm"); errors.Is(err, fs.ErrNotExist) {
		// A -wal without its -shm: a writer killed between creating the
		// two. The -wal may hold commits the file lacks, so immutable=1
		// would read an old ledger; SQLite rebuilds the -shm from the
		// -wal, even read-only, if it may create it in the directory.
		if unix.Access(filepath.Dir(real), unix.W_OK) != nil {
			return nil, &FileError{Path: real + "-shm", Err: ErrReadOnly,
				msg: " is missing beside a -wal (a consumer was killed), and this user may not create it. Try: run the report as the queue's owner once, or start the consumer"}
		}
	} else if !readable(real + "-shm") {
		return nil, &FileError{Path: real + "-shm", Err: ErrReadOnly, msg: " cannot be read: a reader of a ledger in use needs read access to its -shm and -wal"}
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	l, err := ledger.New(ctx, db, Dialect(), ledger.Options{MustExist: true, ReadOnly: true})
	if err != nil {
		_ = db.Close() // the error that matters is New's
		return nil, openError(path, err)
	}
	return l, nil
}

func readable(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	_ = f.Close()
	return true
}
