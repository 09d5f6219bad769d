//go:build linux

package queue

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// TempPrefix starts the name of every file spool writes aside before
// renaming it into place (WriteFile, Enqueue, the queue's identity). Such a
// file is never a message (its name starts with "."), and its writer holds
// an flock on it until it is renamed or removed, so a temp file whose lock
// is free was left by a writer that died.
const TempPrefix = ".spool-tmp-"

// StaleTempAge is how old an unlocked temp file must be before it counts as
// stale: it covers the instant between a writer creating the file and
// locking it, and a writer of a version that did not lock.
const StaleTempAge = time.Minute

// Temp is a temp file or unpublished session directory left in the queue.
type Temp struct {
	// Where is the stage holding it, or "" for the queue directory itself.
	Where Stage
	Name  string
	Size  int64
	// ModTime is its last modification.
	ModTime time.Time
	// Stale reports that its writer is gone: its lock is free and it is
	// older than StaleTempAge (for a session directory, staleJoin).
	Stale bool
}

// Path is the temp file's path relative to the queue directory.
func (t Temp) Path() string {
	if t.Where == "" {
		return t.Name
	}
	return string(t.Where) + "/" + t.Name
}

// Where temp files live. Every temp file spool writes is in the queue
// directory or in inbox/: Enqueue and WriteFile to inbox/ write theirs in
// inbox/, the queue's identity and WriteFile to any other stage in the
// queue directory (writeFrom), so a start sweeps those two and never reads
// done/ or error/, whose history grows without bound. Temp files found in
// done/ or error/ were left by an embedder of an older version (WriteFile
// to those stages wrote its temp file there) or by the readiness probe's
// fallback on a filesystem without O_TMPFILE; status and fsck count them,
// and fsck --repair removes the stale ones.
var (
	// startStages are what a start sweeps: "" is the queue directory.
	startStages = []Stage{"", Inbox}
	// allStages adds the stages of the queue's history.
	allStages = []Stage{"", Inbox, Done, Error}
)

// Temps lists the temp files in the queue directory and in inbox/, done/
// and error/, and the directories of consumers killed while joining
// (".join-*" in the queue directory), with whether each is stale. It reads
// each directory in chunks, keeping only the temp files: its memory grows
// with their number, not with the stage's.
func (d *Dir) Temps() ([]Temp, error) {
	return d.temps(allStages)
}

// temps is Temps over the given places.
func (d *Dir) temps(places []Stage) ([]Temp, error) {
	var out []Temp
	buf := make([]byte, tempBuffer)
	for _, w := range places {
		dirfd := d.root
		if w != "" {
			dirfd = d.fd(w)
		}
		err := eachEntry(dirfd, buf, func(b []byte, _ uint8) error {
			join := w == "" && bytes.HasPrefix(b, []byte(joinPrefix))
			if !join && !bytes.HasPrefix(b, []byte(TempPrefix)) {
				return nil
			}
			name := string(b)
			var st unix.Stat_t
			if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if errors.Is(err, unix.ENOENT) {
					return nil
				}
				return fmt.Errorf("%s: %w", name, err)
			}
			t := Temp{Where: w, Name: name, Size: st.Size, ModTime: time.Unix(st.Mtim.Unix())}
			age := StaleTempAge
			if join {
				age = staleJoin
			}
			t.Stale = time.Since(t.ModTime) >= age && unlocked(dirfd, name)
			out = append(out, t)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list temp files: %w", err)
		}
	}
	return out, nil
}

// tempBuffer is how much of a directory one getdents call of the temp
// sweep reads: inbox/ with a million waiting files takes about 150 calls,
// and the sweep's memory stays this buffer whatever the directory holds.
const tempBuffer = 128 << 10

// unlocked reports whether the flock on dirfd/name is free, without
// keeping it.
func unlocked(dirfd int, name string) bool {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil
}

// RemoveStaleTemps removes the stale temp files of the queue directory and
// inbox/, and the stale directories of consumers killed while joining, and
// returns what it removed: what a start does before it claims. It reads
// neither done/ nor error/, where no temp file of this version is made, so
// a start costs nothing per file of the queue's history. A temp file that
// a live writer holds is never removed.
func (d *Dir) RemoveStaleTemps() ([]Temp, error) {
	return d.removeStaleTemps(startStages)
}

// RemoveAllStaleTemps is RemoveStaleTemps that also sweeps done/ and
// error/, reading every entry of them (in chunks): for spool fsck
// --repair, which reads those stages anyway, and removes the temp files
// older versions left there.
func (d *Dir) RemoveAllStaleTemps() ([]Temp, error) {
	return d.removeStaleTemps(allStages)
}

func (d *Dir) removeStaleTemps(places []Stage) ([]Temp, error) {
	temps, err := d.temps(places)
	if err != nil {
		return nil, err
	}
	var removed []Temp
	synced := map[Stage]bool{}
	for _, t := range temps {
		if !t.Stale {
			continue
		}
		dirfd := d.root
		if t.Where != "" {
			dirfd = d.fd(t.Where)
		}
		flags := 0
		if strings.HasPrefix(t.Name, joinPrefix) {
			flags = unix.AT_REMOVEDIR
		}
		if err := removeUnlocked(dirfd, t.Name, flags); err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EWOULDBLOCK) || errors.Is(err, unix.ENOTEMPTY) {
				continue
			}
			return removed, fmt.Errorf("remove %s: %w", t.Path(), err)
		}
		removed = append(removed, t)
		synced[t.Where] = false
	}
	for w := range synced {
		fd := d.root
		if w != "" {
			fd = d.fd(w)
		}
		if err := unix.Fsync(fd); err != nil {
			return removed, fmt.Errorf("sync after removing temp files: %w", err)
		}
	}
	return removed, nil
}

// removeUnlocked removes dirfd/name while holding its flock, so that a
// writer cannot take it between the check and the removal.
func removeUnlocked(dirfd int, name string, flags int) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return err
	}
	return unix.Unlinkat(dirfd, name, flags)
}
