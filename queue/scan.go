//go:build linux

package queue

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// ScanChunk is how many directory entries Scan reads at a time: a million
// waiting files never become one list in memory.
const ScanChunk = 512

// Scan calls fn with the message names of a stage, a chunk at a time, each
// chunk sorted so that runs over the same directory are reproducible. Names
// that are not messages are skipped. Entries added or removed while Scan
// runs may or may not be seen (readdir semantics); callers that must see
// everything scan again until a pass finds nothing. If fn returns an error,
// Scan stops and returns it.
func (d *Dir) Scan(s Stage, fn func(names []string) error) error {
	return d.scanWhere(s, func(n string) bool { return d.isMessage(s, []byte(n)) }, fn)
}

// scanWhere is Scan of the names of a stage that keep takes, messages or
// not (ListDoneFiles).
func (d *Dir) scanWhere(s Stage, keep func(name string) bool, fn func(names []string) error) error {
	if d.fd(s) < 0 {
		return nil // a queue without held/ holds nothing there
	}
	fd, err := unix.Openat(d.fd(s), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("scan %s: %w", s, err)
	}
	f := os.NewFile(uintptr(fd), string(s))
	defer f.Close()
	for {
		names, err := f.Readdirnames(ScanChunk)
		msgs := names[:0]
		for _, n := range names {
			if keep(n) {
				msgs = append(msgs, n)
			}
		}
		if len(msgs) > 0 {
			sort.Strings(msgs)
			if ferr := fn(msgs); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("scan %s: %w", s, err)
		}
	}
}

// Count returns the number of messages in a stage. For processing/ it
// counts the claims inside every session directory, plus any message left
// directly in processing/.
func (d *Dir) Count(s Stage) (int, error) {
	n := 0
	err := d.Scan(s, func(names []string) error { n += len(names); return nil })
	if err != nil || s != Processing {
		return n, err
	}
	names, err := readNames(d.fd(Processing))
	if err != nil {
		return n, fmt.Errorf("count processing: %w", err)
	}
	for _, name := range names {
		fd, err := unix.Openat(d.fd(Processing), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // not a session directory, or gone meanwhile
		}
		entries, err := readNames(fd)
		unix.Close(fd)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if d.IsMessage(Processing, e) {
				n++
			}
		}
	}
	return n, nil
}

// Entry is a message file in a stage, as lstat sees it.
type Entry struct {
	Name    string
	Ino     uint64
	Mode    uint32
	Size    int64
	ModTime int64 // Unix nanoseconds
	// ChangeTime is the status change time (ctime), Unix nanoseconds: a
	// move between stages sets it, so in done/ it says when the file got
	// there, which was just after its record committed.
	ChangeTime int64
}

// Regular reports whether the entry is a regular file.
func (e Entry) Regular() bool { return e.Mode&unix.S_IFMT == unix.S_IFREG }

// List calls fn for every message of a stage with its lstat information,
// a chunk at a time, in the order of Scan.
func (d *Dir) List(s Stage, fn func(Entry) error) error {
	return d.Scan(s, d.statEach(s, fn))
}

// statEach is a Scan function calling fn for each name of stage s with
// its lstat information; a name gone meanwhile is skipped.
func (d *Dir) statEach(s Stage, fn func(Entry) error) func(names []string) error {
	return func(names []string) error {
		for _, n := range names {
			var st unix.Stat_t
			if err := unix.Fstatat(d.fd(s), n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue
				}
				return fmt.Errorf("stat %s/%s: %w", s, n, err)
			}
			if err := fn(Entry{Name: n, Ino: st.Ino, Mode: st.Mode, Size: st.Size, ModTime: st.Mtim.Nano(), ChangeTime: st.Ctim.Nano()}); err != nil {
				return err
			}
		}
		return nil
	}
}

// ReadEntry reads a message of a stage without claiming it, with the same
// protections as Session.Read (no links followed, no FIFO opened, no file
// over limit read). It is for inspection (schema inference), never for
// consuming: consumers claim first.
func (d *Dir) ReadEntry(s Stage, e Entry, limit int64) ([]byte, error) {
	return readAt(d.fd(s), &Claim{Name: e.Name, Ino: e.Ino, Mode: e.Mode, Size: e.Size}, limit, nil)
}

// Inode returns the inode number of the message file name of a stage, as
// lstat sees it (a link is not followed); ok is false when the stage has
// no such name, or when name is not a message name (a path, a temp or
// staging name). It is one fstatat: for checking a record against its
// stage without listing the stage.
func (d *Dir) Inode(s Stage, name string) (ino uint64, ok bool, err error) {
	if !d.IsMessage(s, name) || strings.ContainsRune(name, '/') || d.fd(s) < 0 {
		return 0, false, nil
	}
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd(s), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ENAMETOOLONG) {
			return 0, false, nil
		}
		return 0, false, fmt.Errorf("stat %s/%s: %w", s, name, err)
	}
	return st.Ino, true, nil
}
