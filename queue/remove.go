//go:build linux

package queue

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// RemoveDone removes the file name from done/ when it is still the file
// with inode ino (an Entry of List), and reports whether it removed it: a
// name that is gone, or that now names another file, is left alone. It
// does not sync done/; call Sync(Done) once after a run of removals. It is
// for spool prune --files, which removes the files whose ledger rows it
// removes; nothing else in spool removes a message, and error/ is never
// pruned. Prune also gives it the done-files of done/ (ListDoneFiles).
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
// lstat information. A done-file is moved into done/ or error/ with its
// data file and no ledger row records it: spool prune --files lists
// done/ with it, and removes those old enough with RemoveDone, which
// nothing else would.
func (d *Dir) ListDoneFiles(s Stage, fn func(Entry) error) error {
	if d.doneFiles == nil {
		return nil
	}
	return d.scanWhere(s, func(n string) bool {
		done, _ := d.doneFiles(n)
		return done && n[0] != '.' && !d.isMessage(s, []byte(n))
	}, d.statEach(s, fn))
}

// StrayDoneFiles calls fn for every done-file of stage s (ListDoneFiles)
// that announces no file of s. A batch file's done-file goes into done/ or
// error/ just before the file itself, so one alone there was left by a
// finish killed between the two moves, or by an operator's mv or rm: in
// error/ nothing would ever take it, since replay and discard take a
// done-file with its file. A finish under way shows its done-file alone
// for the moment between its moves.
func (d *Dir) StrayDoneFiles(s Stage, fn func(Entry) error) error {
	if d.announce == nil {
		return nil
	}
	// The done-files first: a pair moved in after them is not looked at,
	// rather than seen half.
	var doneFiles []Entry
	if err := d.ListDoneFiles(s, func(e Entry) error {
		doneFiles = append(doneFiles, e)
		return nil
	}); err != nil || len(doneFiles) == 0 {
		return err
	}
	announced := map[string]bool{}
	err := d.scanWhere(s, func(n string) bool { return n[0] != '.' }, func(names []string) error {
		for _, n := range names {
			if done := d.announce.of(n); done != "" {
				announced[done] = true
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, e := range doneFiles {
		if !announced[e.Name] {
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}
