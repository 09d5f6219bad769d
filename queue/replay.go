//go:build linux

package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrPathLike is wrapped by Replay for a name that is a path rather than a
// file name in error/ ("../x.json", "error/a.json"): it could reach outside
// the stage, so it is refused before anything moves.
var ErrPathLike = errors.New("path-like name")

// ErrNotInError is wrapped by Replay for a name that is not a message in
// error/.
var ErrNotInError = errors.New("not in error/")

// CheckName refuses a name that is not a plain file name.
func CheckName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%q: %w", name, ErrPathLike)
	}
	return nil
}

// StagingPrefix starts the hidden name a replay gives a dead letter in
// error/ while it moves it: not a message name, so neither consumers nor
// reports see it, and one name per (intent, item), so that a replay killed
// half-way can tell the files it has still to move (docs/DESIGN.md,
// "Replay").
const StagingPrefix = ".spool-replay-"

// StagingName is the staging name of item idx of replay intent id.
func StagingName(id int64, idx int) string {
	return StagingPrefix + strconv.FormatInt(id, 10) + "-" + strconv.Itoa(idx)
}

// Stage renames error/name, if it is still the file with inode ino, to
// its staging name in error/. It reports false, and moves nothing, when
// error/name is gone or is another file; a file already staged is left
// there and reported true. Call Sync(Error) after staging a batch.
func (d *Dir) Stage(id int64, idx int, name string, ino uint64) (bool, error) {
	return d.stageAs(StagingName(id, idx), name, ino)
}

// Release moves item idx of replay intent id from its staging name in
// error/ to inbox/name (suffixed on a collision), and returns the name it
// got there. It reports false when the staging name is gone: the file was
// released before. Call Sync(Inbox, Error) after releasing a batch.
func (d *Dir) Release(id int64, idx int, name string) (string, bool, error) {
	if err := CheckName(name); err != nil {
		return "", false, fmt.Errorf("release %s: %w", name, err)
	}
	staged := StagingName(id, idx)
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd(Error), staged, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("release %s: %w", name, err)
	}
	// A whole batch file dead-lettered in a queue of announced files
	// went to error/ with its done-file, which comes back with it as
	// its announcement (or a new one): unannounced, it would wait in
	// inbox/ for ever (SetAnnouncer, returnAnnounced).
	done := d.announce.of(name)
	if done != "" && !exists(d.fd(Error), done) {
		done = ""
	}
	final, _, err := d.returnAnnounced(d.fd(Error), staged, name, st.Ino, done, d.announce)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("release %s: %w", name, err)
	}
	return final, true, nil
}

// Locate returns the stage and name of the message file with inode ino,
// as LocateAll does; ok is false when no stage holds it.
func (d *Dir) Locate(ino uint64) (s Stage, name string, ok bool, err error) {
	at, err := d.LocateAll([]uint64{ino})
	if err != nil {
		return "", "", false, err
	}
	l, ok := at[ino]
	return l.Stage, l.Name, ok, nil
}

// Located is where LocateAll found a file.
type Located struct {
	Stage Stage
	Name  string
}

// LocateAll finds the message files with the given inodes, looking in
// inbox/, the claims in processing/, error/ and done/, in that order, the
// first place found winning; an inode that no stage holds is not in the
// map. It lists each stage once for all of them, and stops once every one
// is found: it is for the rare question of where files went after a
// crash, and must not cost a pass over a large stage per file.
func (d *Dir) LocateAll(inos []uint64) (map[uint64]Located, error) {
	want := make(map[uint64]bool, len(inos))
	for _, i := range inos {
		want[i] = true
	}
	out := make(map[uint64]Located, len(inos))
	found := errors.New("found")
	take := func(s Stage, ino uint64, name string) error {
		if want[ino] {
			if _, seen := out[ino]; !seen {
				out[ino] = Located{Stage: s, Name: name}
				if len(out) == len(want) {
					return found
				}
			}
		}
		return nil
	}
	for _, s := range []Stage{Inbox, Processing, Error, Done} {
		if len(out) == len(want) {
			break
		}
		err := d.List(s, func(e Entry) error { return take(s, e.Ino, e.Name) })
		if err == nil && s == Processing {
			var claims []ClaimFile
			if claims, err = d.ClaimFiles(); err == nil {
				for _, c := range claims {
					if err = take(s, c.Ino, c.Name); err != nil {
						break
					}
				}
			}
		}
		if errors.Is(err, found) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("locate files: %w", err)
		}
	}
	return out, nil
}

// LockReplays takes the queue's replay lock, waiting for it, and returns
// the function that releases it: one replay at a time per queue, so that
// two runs never stage, release or finish the same intent at once, and a
// replay's selection is not raced by another's moves. The lock is an flock
// on error/ itself, so it needs no file of its own, and the kernel
// releases it if the process dies.
func (d *Dir) LockReplays(ctx context.Context) (unlock func() error, err error) {
	fd, err := unix.Openat(d.fd(Error), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("lock replays: %w", err)
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			unix.Close(fd)
			return nil, fmt.Errorf("lock replays: %w", err)
		}
		select {
		case <-ctx.Done():
			unix.Close(fd)
			return nil, fmt.Errorf("lock replays: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
	return func() error { return unix.Close(fd) }, nil
}

// ReplayRunning reports whether a replay holds the queue's replay lock now:
// its unfinished intent is in progress, not interrupted. It does not keep
// the lock.
func (d *Dir) ReplayRunning() (bool, error) {
	fd, err := unix.Openat(d.fd(Error), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("test replay lock: %w", err)
	}
	defer unix.Close(fd)
	switch err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); {
	case err == nil:
		return false, nil // released by the close
	case errors.Is(err, unix.EWOULDBLOCK):
		return true, nil
	default:
		return false, fmt.Errorf("test replay lock: %w", err)
	}
}
