//go:build linux

package queue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// This file holds CreateFile, the crash-safe write of a new file outside
// the stages whose content another writer (SQLite's VACUUM INTO) fills by
// name, and the sweep of the temp files it leaves when killed.

// tempPrefix is the prefix of CreateFile's (and ReplaceFile's) temp files
// beside the file at path.
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// CreateFile makes a new file at path atomically and durably. fill fills
// a hidden temp file beside path (".NAME.tmp-RANDOM", mode 0600, empty,
// flocked while fill runs so that RemoveStaleTempsBeside leaves it alone),
// given its path, for a writer that opens it by name; the temp file is
// then fsynced and renamed to path, never over an existing file (EEXIST)
// unless replace, and the directory is fsynced. Until the rename, a
// failure removes the temp file and leaves path as it was; a writer killed
// meanwhile leaves only the temp file, which RemoveStaleTempsBeside
// removes.
func CreateFile(path string, replace bool, fill func(tmp string) error) error {
	dir := filepath.Dir(path)
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, &os.PathError{Op: "open", Path: dir, Err: err})
	}
	base := filepath.Base(path)
	_, err = writeAtomic(dirfd, dirfd, tempPrefix(path),
		func(f *os.File) error {
			if err := f.Chmod(0o600); err != nil {
				return err
			}
			return fill(filepath.Join(dir, f.Name()))
		},
		func(tmp string) (string, error) {
			if replace {
				return base, unix.Renameat(dirfd, tmp, dirfd, base)
			}
			return base, renameNoReplace(dirfd, tmp, dirfd, base)
		})
	if cerr := unix.Close(dirfd); cerr != nil && err == nil {
		err = fmt.Errorf("close %s: %w", dir, cerr)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}

// RemoveStaleTempsBeside removes the temp files that a CreateFile or
// ReplaceFile of path killed before it finished left beside it (those
// whose flock is free: a live writer's are kept), and the files SQLite
// made beside such a temp file (its -journal, -wal, -shm), and returns
// the names it removed.
func RemoveStaleTempsBeside(path string) ([]string, error) {
	dir := filepath.Dir(path)
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("remove temp files beside %s: %w", path, &os.PathError{Op: "open", Path: dir, Err: err})
	}
	defer unix.Close(dirfd)
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("remove temp files beside %s: %w", path, err)
	}
	names, err := f.Readdirnames(-1)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("remove temp files beside %s: %w", path, err)
	}
	prefix := tempPrefix(path)
	var removed []string
	for _, n := range names {
		if !strings.HasPrefix(n, prefix) || strings.ContainsRune(n[len(prefix):], '-') {
			continue
		}
		if err := removeUnlocked(dirfd, n, 0); err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EWOULDBLOCK) {
				continue
			}
			return removed, fmt.Errorf("remove %s: %w", filepath.Join(dir, n), err)
		}
		removed = append(removed, n)
		for _, side := range []string{"-journal", "-wal", "-shm"} {
			if err := unix.Unlinkat(dirfd, n+side, 0); err == nil {
				removed = append(removed, n+side)
			} else if !errors.Is(err, unix.ENOENT) {
				return removed, fmt.Errorf("remove %s: %w", filepath.Join(dir, n+side), err)
			}
		}
	}
	if len(removed) > 0 {
		if err := unix.Fsync(dirfd); err != nil {
			return removed, fmt.Errorf("sync %s: %w", dir, err)
		}
	}
	return removed, nil
}
