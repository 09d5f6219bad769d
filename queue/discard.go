//go:build linux

package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// This file holds the moves of spool discard (package discard): a dead
// letter is first renamed, within error/, to a hidden staging name of its
// own, and only then unlinked or moved out of the queue, so that a discard
// killed half-way can tell the files it has still to remove from those it
// removed (docs/DESIGN.md, "Discard").

// DiscardPrefix starts the hidden name a discard gives a dead letter in
// error/ before it removes it: not a message name, so neither consumers
// nor reports see it, nor a temp name, so no sweep removes it.
const DiscardPrefix = ".spool-discard-"

// DiscardName is the staging name of item idx of discard batch id.
func DiscardName(id int64, idx int) string {
	return DiscardPrefix + strconv.FormatInt(id, 10) + "-" + strconv.Itoa(idx)
}

// ErrTargetInQueue is wrapped by OpenTarget for a directory inside the
// queue: a dead letter moved there would still be in the queue.
var ErrTargetInQueue = errors.New("is inside the queue")

// ErrTargetCrossDevice is wrapped by OpenTarget for a directory on another
// filesystem than the queue: a rename there would not be atomic.
var ErrTargetCrossDevice = errors.New("is on another filesystem than the queue")

// ErrTargetOpen is wrapped by OpenTarget for a directory whose mode gives
// other users (the "others" of its permission bits) any access: a dead
// letter moved there keeps its inode and so its mode, often readable by
// all, and the queue's own directories are closed to others
// (docs/OPERATIONS.md, "The user and the permissions").
var ErrTargetOpen = errors.New("is open to other users")

// StageDiscard renames error/name, if it is still the file with inode ino,
// to the staging name of item idx of discard batch id. It reports false,
// and moves nothing, when error/name is gone or is another file; a file
// already staged is left there and reported true. Call Sync(Error) after
// staging a batch.
func (d *Dir) StageDiscard(id int64, idx int, name string, ino uint64) (bool, error) {
	return d.stageAs(DiscardName(id, idx), name, ino)
}

// stageAs renames error/name, if it is still the file with inode ino, to
// error/staging; see Stage.
func (d *Dir) stageAs(staging, name string, ino uint64) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd(Error), staging, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		return true, nil
	}
	if err := CheckName(name); err != nil {
		return false, fmt.Errorf("stage %s: %w", name, err)
	}
	if err := unix.Fstatat(d.fd(Error), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("stage %s: %w", name, err)
	}
	if ino != 0 && st.Ino != ino {
		return false, nil
	}
	if err := renameNoReplace(d.fd(Error), name, d.fd(Error), staging); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil // taken by another run meanwhile
		}
		return false, fmt.Errorf("stage %s: %w", name, err)
	}
	return true, nil
}

// DropStaged unlinks the staging name of item idx of discard batch id. It
// reports false when the name is gone: dropped or moved before. Call
// Sync(Error) after dropping a batch.
func (d *Dir) DropStaged(id int64, idx int) (bool, error) {
	name := DiscardName(id, idx)
	if err := unix.Unlinkat(d.fd(Error), name, 0); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("remove error/%s: %w", name, err)
	}
	return true, nil
}

// MoveStaged moves the staging name of item idx of discard batch id to
// t/name (suffixed on a collision, never replacing a file), and returns
// the name it got there. It reports false when the staging name is gone:
// moved before. Call Sync(Error) and t.Sync after moving a batch.
func (d *Dir) MoveStaged(id int64, idx int, name string, t *Target) (string, bool, error) {
	if err := CheckName(name); err != nil {
		return "", false, fmt.Errorf("move %s: %w", name, err)
	}
	final, err := moveUniqueAs(d.fd(Error), DiscardName(id, idx), t.fd, name)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("move %s to %s: %w", name, t.path, err)
	}
	return final, true, nil
}

// Target is a directory outside the queue, on its filesystem, that
// dead letters are moved to (spool discard --to).
type Target struct {
	path string
	fd   int
}

// OpenTarget opens path as a Target. It refuses, before anything moves,
// a path that is missing or not a directory, a directory on another
// filesystem than the queue (a rename there would not be atomic:
// ErrTargetCrossDevice), the queue itself or a directory inside it,
// however named (ErrTargetInQueue: it walks up from the directory by "..",
// comparing each with the queue), a directory open to other users
// (ErrTargetOpen: a moved file keeps its mode) and one this process may
// not write. Each error begins with path.
func (d *Dir) OpenTarget(path string) (*Target, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t := &Target{path: path, fd: fd}
	if err := d.checkTarget(fd, path); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return t, nil
}

func (d *Dir) checkTarget(fd int, path string) error {
	var root, st unix.Stat_t
	if err := unix.Fstat(d.root, &root); err != nil {
		return fmt.Errorf("stat %s: %w", d.path, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Dev != root.Dev {
		return fmt.Errorf("%s %w %s, so a move there would not be atomic (give a directory on its filesystem, and move the files on from there)", path, ErrTargetCrossDevice, d.path)
	}
	if err := d.outsideQueue(fd, path, st, root); err != nil {
		return err
	}
	if mode := st.Mode & 0o7777; mode&0o007 != 0 {
		return fmt.Errorf("%s %w (mode %04o): a dead letter moved there keeps its own mode and could be read by anyone; give a directory closed to them (chmod o-rwx)", path, ErrTargetOpen, mode)
	}
	if err := unix.Faccessat(fd, ".", unix.W_OK|unix.X_OK, 0); err != nil {
		return fmt.Errorf("%s: may not write it: %w", path, err)
	}
	return nil
}

// outsideQueue refuses directory fd (path, whose stat is st) when it is
// the queue (whose stat is root) or inside it: it walks up by "..".
func (d *Dir) outsideQueue(fd int, path string, st, root unix.Stat_t) error {
	cur, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer func() { unix.Close(cur) }()
	for {
		if st.Dev == root.Dev && st.Ino == root.Ino {
			return fmt.Errorf("%s %w %s", path, ErrTargetInQueue, d.path)
		}
		parent, err := unix.Openat(cur, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s/..: %w", path, err)
		}
		var pst unix.Stat_t
		if err := unix.Fstat(parent, &pst); err != nil {
			unix.Close(parent)
			return fmt.Errorf("stat %s/..: %w", path, err)
		}
		unix.Close(cur)
		cur = parent
		if pst.Dev == st.Dev && pst.Ino == st.Ino {
			return nil // the filesystem's root: its own parent
		}
		st = pst
	}
}

// Path returns the path the target was opened by.
func (t *Target) Path() string { return t.path }

// Sync makes the target's entries durable (fsync of the directory).
func (t *Target) Sync() error {
	if err := unix.Fsync(t.fd); err != nil {
		return fmt.Errorf("sync %s: %w", t.path, err)
	}
	return nil
}

// Locate returns the name of the entry of the target with inode ino; ok is
// false when it holds none. It is for a discard killed after a move and
// before it recorded the name the file got.
func (t *Target) Locate(ino uint64) (name string, ok bool, err error) {
	fd, err := unix.Openat(t.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false, fmt.Errorf("list %s: %w", t.path, err)
	}
	f := os.NewFile(uintptr(fd), t.path)
	defer f.Close() // read-only: a close error loses nothing
	for {
		names, err := f.Readdirnames(1024)
		for _, n := range names {
			var st unix.Stat_t
			if unix.Fstatat(t.fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Ino == ino {
				return n, true, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return "", false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("list %s: %w", t.path, err)
		}
	}
}

// Close releases the target's descriptor.
func (t *Target) Close() error {
	if err := unix.Close(t.fd); err != nil {
		return fmt.Errorf("close %s: %w", t.path, err)
	}
	return nil
}

// HashFile returns the hex SHA-256 (as spool.ContentHash) and the size of
// the whole content of the message name of a stage, if it is still the file
// with inode ino, streaming it whatever its size. The hash is empty for an
// entry that is not a regular file (no link is followed, no FIFO opened).
// It fails with an error wrapping os.ErrNotExist when the entry is gone or
// is now another file.
func (d *Dir) HashFile(s Stage, name string, ino uint64) (string, int64, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd(s), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return "", 0, fmt.Errorf("hash %s/%s: %w", s, name, os.ErrNotExist)
		}
		return "", 0, fmt.Errorf("hash %s/%s: %w", s, name, err)
	}
	if st.Ino != ino {
		return "", 0, fmt.Errorf("hash %s/%s: replaced since it was listed: %w", s, name, os.ErrNotExist)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", st.Size, nil
	}
	fd, err := unix.Openat(d.fd(s), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) {
			return "", 0, fmt.Errorf("hash %s/%s: replaced since it was listed: %w", s, name, os.ErrNotExist)
		}
		return "", 0, fmt.Errorf("hash %s/%s: %w", s, name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close() // read-only: a close error loses nothing
	if err := unix.Fstat(fd, &st); err != nil {
		return "", 0, fmt.Errorf("hash %s/%s: %w", s, name, err)
	}
	if st.Ino != ino || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", 0, fmt.Errorf("hash %s/%s: replaced since it was listed: %w", s, name, os.ErrNotExist)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("hash %s/%s: %w", s, name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// DiscardDoneFile takes away the done-file of the dead letter name from
// error/ once a discard has dropped or moved name itself: it moves it to
// t (suffixed on a collision) when t is not nil, else unlinks it. A batch
// file that could not be read at all goes to error/ with its done-file
// (SetAnnouncer names it), which would otherwise stay there for ever,
// announcing nothing. Nothing is done without an announcer, for a name
// that needs no done-file, or when error/ holds no regular file of that
// name; so a discard resumed after a kill calls it again safely. Call
// Sync(Error) (and t.Sync) after a batch.
func (d *Dir) DiscardDoneFile(name string, t *Target) error {
	done := d.announce.of(name)
	if done == "" {
		return nil
	}
	if err := CheckName(done); err != nil {
		return fmt.Errorf("discard done-file of %s: %w", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd(Error), done, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("discard done-file %s: %w", done, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	if t != nil {
		if _, err := moveUniqueAs(d.fd(Error), done, t.fd, done); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("move done-file %s to %s: %w", done, t.path, err)
		}
		return nil
	}
	if err := unix.Unlinkat(d.fd(Error), done, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove done-file error/%s: %w", done, err)
	}
	return nil
}
