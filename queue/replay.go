//go:build linux

package queue

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrPathLike is wrapped by Replay for a name that is a path rather than a
// file name in error/ ("../x.json", "error/a.json"): it could reach outside
// the stage, so it is refused before anything moves.
var ErrPathLike = errors.New("path-like name")

// ErrNotInError is wrapped by Replay for a name that is not a message in
// error/.
var ErrNotInError = errors.New("not in error/")

// Replayed is one file Replay moved back to inbox/.
type Replayed struct {
	File    string // its name in error/
	NewName string // its name in inbox/ (suffixed on a collision)
	Ino     uint64
}

// CheckName refuses a name that is not a plain file name.
func CheckName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%q: %w", name, ErrPathLike)
	}
	return nil
}

// Replay moves the named dead letters from error/ back to inbox/, all or
// nothing: every name is checked before anything moves, and if a move fails
// half-way the ones already moved are put back. Repeated names are replayed
// once.
func (d *Dir) Replay(names []string) ([]Replayed, error) {
	seen := map[string]bool{}
	var todo []Replayed
	for _, n := range names {
		if err := CheckName(n); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
	}
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		var st unix.Stat_t
		if !IsMessageName(n) {
			return nil, fmt.Errorf("replay %s: %w", n, ErrNotInError)
		}
		if err := unix.Fstatat(d.fd(Error), n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil, fmt.Errorf("replay %s: %w", n, ErrNotInError)
			}
			return nil, fmt.Errorf("replay %s: %w", n, err)
		}
		todo = append(todo, Replayed{File: n, Ino: st.Ino})
	}
	for i := range todo {
		final, err := moveUnique(d.fd(Error), todo[i].File, d.fd(Inbox))
		if err != nil {
			// Undo: put back what already moved, so the queue is unchanged.
			for j := i - 1; j >= 0; j-- {
				_ = renameNoReplace(d.fd(Inbox), todo[j].NewName, d.fd(Error), todo[j].File)
			}
			if errors.Is(err, unix.ENOENT) {
				err = ErrNotInError
			}
			return nil, fmt.Errorf("replay %s: %w", todo[i].File, err)
		}
		todo[i].NewName = final
	}
	if err := d.Sync(Inbox, Error); err != nil {
		return todo, fmt.Errorf("replay: %w", err)
	}
	return todo, nil
}
