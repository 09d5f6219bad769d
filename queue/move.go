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

// renameNoReplace renames olddir/old to newdir/new and fails with EEXIST,
// never overwriting, when new exists. Nothing is ever overwritten in any
// stage (docs/DESIGN.md, "Nothing is overwritten"), so every move between
// stages goes through here.
func renameNoReplace(olddir int, old string, newdir int, new string) error {
	if !noReplaceUnsupported.Load() {
		err := unix.Renameat2(olddir, old, newdir, new, unix.RENAME_NOREPLACE)
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
		return unix.Unlinkat(olddir, old, 0)
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
func moveUniqueAs(olddir int, old string, newdir int, name string) (string, error) {
	err := renameNoReplace(olddir, old, newdir, name)
	if err == nil || !errors.Is(err, unix.EEXIST) {
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
	}
	return "", fmt.Errorf("no free name for %s after %d tries", name, maxSuffixTries)
}

// maxNameBytes is NAME_MAX on Linux filesystems.
const maxNameBytes = 255

// suffixed returns name with "~n" placed before its ".json" extension
// ("a.json", 2 -> "a~2.json"), shortening the stem on a UTF-8 boundary when
// the result would exceed NAME_MAX.
func suffixed(name string, n int) string {
	stem, ext := name, ""
	if strings.HasSuffix(name, ".json") {
		stem, ext = name[:len(name)-len(".json")], ".json"
	}
	suf := "~" + strconv.Itoa(n)
	for len(stem)+len(suf)+len(ext) > maxNameBytes && len(stem) > 0 {
		_, size := utf8.DecodeLastRuneInString(stem)
		stem = stem[:len(stem)-size]
	}
	return stem + suf + ext
}
