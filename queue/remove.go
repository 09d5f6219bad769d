//go:build linux

package queue

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// RemoveDone removes the file name from done/ when it is still the file
// with inode ino (an Entry of List), and reports whether it removed it: a
// name that is gone, or that now names another file, is left alone. It
// does not sync done/; call Sync(Done) once after a run of removals. It is
// for spool prune --files, which removes the files whose ledger rows it
// removes; nothing else in spool removes a message, and error/ is never
// pruned. It removes the done-files of done/ too (ListDoneFiles).
func (d *Dir) RemoveDone(name string, ino uint64) (bool, error) {
	if err := CheckName(name); err != nil {
		return false, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd(Done), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("remove %s/%s: %w", Done, name, err)
	}
	if st.Ino != ino || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, nil
	}
	if err := unix.Unlinkat(d.fd(Done), name, 0); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("remove %s/%s: %w", Done, name, err)
	}
	return true, nil
}

// ListDoneFiles calls fn for every done-file of a stage (by the rule
// SetDoneFiles gave, and no message name; none without one) with its
// lstat information. A
// done-file is moved into done/ or error/ with its data file and no
// ledger row records it: spool prune --files lists done/ with it to remove
// the done-files of the files it prunes, which nothing else would.
func (d *Dir) ListDoneFiles(s Stage, fn func(Entry) error) error {
	if d.doneFiles == nil || d.fd(s) < 0 {
		return nil
	}
	fd, err := unix.Openat(d.fd(s), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("list done-files of %s: %w", s, err)
	}
	f := os.NewFile(uintptr(fd), string(s))
	defer f.Close()
	for {
		names, err := f.Readdirnames(ScanChunk)
		for _, n := range names {
			if done, _ := d.doneFiles(n); !done || n[0] == '.' || d.isMessage(s, []byte(n)) {
				continue
			}
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
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("list done-files of %s: %w", s, err)
		}
	}
}
