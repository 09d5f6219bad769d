//go:build linux

package queue

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// noReplaceUnsupported is set once the filesystem has refused
// RENAME_NOREPLACE, so that later moves go straight to the fallback.
var noReplaceUnsupported atomic.Bool

// afterLink runs in the fallback of renameNoReplace between the link and
// the unlink; a test sets it to take the file away there, as another
// mover would.
var afterLink = func() {}

// renameNoReplace renames olddir/old to newdir/new and fails with EEXIST,
// never overwriting, when new exists. Nothing is ever overwritten in any
// stage (docs/DESIGN.md, "Nothing is overwritten"), so every move between
// stages goes through here.
func renameNoReplace(olddir int, old string, newdir int, new string) error {
	if !noReplaceUnsupported.Load() {
		err := renameat2(olddir, old, newdir, new, unix.RENAME_NOREPLACE)
		if err == nil || !(errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP)) {
			return err
		}
		noReplaceUnsupported.Store(true)
	}
	// Fallback for filesystems without RENAME_NOREPLACE (older NFS): a hard
	// link cannot replace an existing name either. A crash between link and
	// unlink leaves two names for one file (docs/DESIGN.md, "Nothing is
	// overwritten").
	err := unix.Linkat(olddir, old, newdir, new, 0)
	if err == nil {
		afterLink()
		err := unix.Unlinkat(olddir, old, 0)
		if errors.Is(err, unix.ENOENT) {
			// Another mover took the file meanwhile (two hosts claiming
			// one file, each with a link of its own): it won, and this
			// move did not happen, so its extra name goes.
			_ = unix.Unlinkat(newdir, new, 0) // a name of the winner's file: nothing is lost if it stays
		}
		return err
	}
	if !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EXDEV) && !errors.Is(err, unix.EMLINK) {
		return err
	}
	// Directories cannot be hard-linked: check, then rename. Racy only
	// against another writer creating the very same name at once.
	var st unix.Stat_t
	if err := unix.Fstatat(newdir, new, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
		return unix.EEXIST
	}
	return unix.Renameat(olddir, old, newdir, new)
}

// maxSuffixTries bounds the search for a free collision suffix.
const maxSuffixTries = 100000

// moveUnique moves olddir/name to newdir, under the same name when it is
// free and otherwise under the first free "stem~N.json" (N from 2), so that
// both files are kept and the newer still counts as a message. It returns
// the name used.
func moveUnique(olddir int, name string, newdir int) (string, error) {
	return moveUniqueAs(olddir, name, newdir, name)
}

// moveUniqueAs is moveUnique with a target name other than the source's.
//
// A name taken by the very file being moved (the same inode) is the trace
// of an earlier move of it by the link-and-unlink fallback of
// renameNoReplace, cut short between the link and the unlink (a crash): the
// file is in newdir already, so the move is finished by removing its old
// name, and the file keeps one name, not two.
func moveUniqueAs(olddir int, old string, newdir int, name string) (string, error) {
	err := renameNoReplace(olddir, old, newdir, name)
	if err == nil || !errors.Is(err, unix.EEXIST) {
		return name, err
	}
	if done, err := linkedAlready(olddir, old, newdir, name); done || err != nil {
		return name, err
	}
	for n := 2; n < maxSuffixTries; n++ {
		cand := suffixed(name, n)
		err := renameNoReplace(olddir, old, newdir, cand)
		if err == nil {
			return cand, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return "", err
		}
		if done, err := linkedAlready(olddir, old, newdir, cand); done || err != nil {
			return cand, err
		}
	}
	return "", fmt.Errorf("no free name for %s after %d tries", name, maxSuffixTries)
}

// linkedAlready reports whether newdir/name is a second name of the
// regular file olddir/old, left by a fallback move cut short, and if so
// removes the old name, finishing that move.
func linkedAlready(olddir int, old string, newdir int, name string) (bool, error) {
	var src, dst unix.Stat_t
	if unix.Fstatat(olddir, old, &src, unix.AT_SYMLINK_NOFOLLOW) != nil || src.Nlink < 2 ||
		src.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, nil
	}
	if unix.Fstatat(newdir, name, &dst, unix.AT_SYMLINK_NOFOLLOW) != nil || dst.Dev != src.Dev || dst.Ino != src.Ino {
		return false, nil
	}
	if err := unix.Unlinkat(olddir, old, 0); err != nil {
		return false, err
	}
	return true, nil
}

// maxNameBytes is NAME_MAX on Linux filesystems.
const maxNameBytes = 255

// suffixed returns name with "~n" placed before its extension ("a.json",
// 2 -> "a~2.json"; "orders~L17.csv" -> "orders~L17~2.csv", so that a batch
// queue's include pattern still takes the copy), shortening the stem on a
// UTF-8 boundary when the result would exceed NAME_MAX.
func suffixed(name string, n int) string {
	stem, ext := name, ""
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		stem, ext = name[:i], name[i:]
	}
	suf := "~" + strconv.Itoa(n)
	for len(stem)+len(suf)+len(ext) > maxNameBytes && len(stem) > 0 {
		_, size := utf8.DecodeLastRuneInString(stem)
		stem = stem[:len(stem)-size]
	}
	return stem + suf + ext
}
