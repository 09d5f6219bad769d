//go:build linux

package queue

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A batch file announced by a done-file is taken from inbox/ only once
// its done-file is there. When such a file goes back to inbox/ unfinished
// (a consumer gives it back as it stops, recovery returns the claim of a
// dead one, an operator releases it from held/ or replays it from
// error/), it must be announced again under the name it gets there.
// The move and the announcement are two steps, and a process killed
// between them would leave the file in inbox/ waiting for an announcement
// that came long ago: taken by nothing, ever.
//
// So the mover first writes a return mark into the directory it moves the
// file from (the session's, held/, or error/ for a replay): .return.<inode>, holding the name
// the file is about to get in inbox/ and the name of its done-file beside
// it, durably; then it moves the file, then announces it, and removes the
// mark only once the announcement is durable. A recovery that finds a
// mark whose file is in inbox/ under that name, with that inode, finishes
// the announcement; a mark whose file is still where it was was written
// before a move that never happened: the file is returned again, with a
// new mark (a session's claim by recovery, a held file by its release, a
// dead letter by the replay's resume).

const returnPrefix = ".return."

// Announcer names the done-file that announces a data file of inbox/
// named name: "" for a file taken without one. The recovery of a queue of
// batch files announced by done-files needs it (RecoverWith,
// Session.ReturnAnnounced); a queue of other files passes nil.
type Announcer func(name string) string

// of is a(name), "" for a nil a.
func (a Announcer) of(name string) string {
	if a == nil {
		return ""
	}
	return a(name)
}

// doneFilesLast orders the claims of a session so that a claimed
// done-file comes after its data file, which recovery returns to inbox/
// with it (returnAnnounced) rather than leave it to the resolver.
func doneFilesLast(claims []string, announce Announcer) []string {
	if announce == nil {
		return claims
	}
	late := map[string]bool{}
	for _, c := range claims {
		if a := announce(c); a != "" && a != c {
			late[a] = true
		}
	}
	if len(late) == 0 {
		return claims
	}
	ordered := make([]string, 0, len(claims))
	for _, c := range claims {
		if !late[c] {
			ordered = append(ordered, c)
		}
	}
	for _, c := range claims {
		if late[c] {
			ordered = append(ordered, c)
		}
	}
	return ordered
}

// ReturnAnnounced puts the claim c back in inbox/, unfinished, and
// announces it there with the done-file announce names for the name it
// gets (the claim's own, or a free "stem~N.ext" when a file of that name
// came meanwhile), crash-safely: see the return marks above. done, the
// claimed done-file of c (nil: none), becomes that announcement when its
// name is free, or goes to done/ when a done-file of that name is there
// already. It returns the name c got in inbox/.
func (s *Session) ReturnAnnounced(c, done *Claim, announce Announcer) (string, error) {
	doneName := ""
	if done != nil {
		doneName = done.Name
	}
	stored, _, err := s.d.returnAnnounced(s.fd, c.Name, c.Name, c.Ino, doneName, announce)
	if err != nil {
		return "", fmt.Errorf("give back %s: %w", c.Name, err)
	}
	return stored, nil
}

// returnAnnounced moves the file name (inode ino) of the directory sfd
// (a session's, or held/) back to inbox/ as as (suffixed on a collision)
// and announces it there (see the return marks above); claimedDone, when
// not "", is its done-file in sfd, which becomes the announcement when it
// can, and otherwise goes to done/. Without an announce, or for a name
// that needs no done-file, it is a plain move. It returns the name the
// file got in inbox/, and the stage claimedDone went to ("" when it
// stayed).
func (d *Dir) returnAnnounced(sfd int, name, as string, ino uint64, claimedDone string, announce Announcer) (string, Stage, error) {
	inbox := d.fd(Inbox)
	if announce.of(as) == "" {
		stored, err := moveUniqueAs(sfd, name, inbox, as)
		return stored, "", err
	}
	mark := returnPrefix + strconv.FormatUint(ino, 10)
	stored := ""
	for n := 1; stored == "" && n < maxSuffixTries; n++ {
		cand := as
		if n > 1 {
			cand = suffixed(as, n)
		}
		if exists(inbox, cand) && !sameFile(sfd, name, inbox, cand) {
			continue
		}
		if err := writeReturnMark(sfd, mark, cand, claimedDone); err != nil {
			return "", "", err
		}
		err := renameNoReplace(sfd, name, inbox, cand)
		if errors.Is(err, unix.EEXIST) {
			var done bool
			if done, err = linkedAlready(sfd, name, inbox, cand); done {
				stored = cand
			}
		} else if err == nil {
			stored = cand
		}
		if err != nil {
			// Moved out by another (ENOENT) or not moved at all: the
			// mark has nothing to finish.
			_ = unix.Unlinkat(sfd, mark, 0)
			return "", "", err
		}
	}
	if stored == "" {
		return "", "", fmt.Errorf("no free name for %s after %d tries", name, maxSuffixTries)
	}
	doneTo, err := d.announceReturn(sfd, stored, claimedDone, announce)
	if err != nil {
		return "", "", err
	}
	if err := unix.Unlinkat(sfd, mark, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return "", "", fmt.Errorf("remove return mark: %w", err)
	}
	return stored, doneTo, nil
}

// announceReturn announces the file stored of inbox/, returned from the
// directory sfd, with claimedDone (when there) or a new empty
// done-file, and makes it durable. A done-file there already is left as
// it is, and claimedDone then goes to done/. It returns the stage
// claimedDone went to ("" when it was not there).
func (d *Dir) announceReturn(sfd int, stored, claimedDone string, announce Announcer) (Stage, error) {
	name := announce(stored)
	if name == "" {
		return "", nil
	}
	var doneTo Stage
	if claimedDone != "" {
		err := renameNoReplace(sfd, claimedDone, d.fd(Inbox), name)
		switch {
		case err == nil:
			doneTo = Inbox
		case errors.Is(err, unix.EEXIST):
			if _, err := moveUnique(sfd, claimedDone, d.fd(Done)); err != nil && !errors.Is(err, unix.ENOENT) {
				return "", fmt.Errorf("finish %s to %s: %w", claimedDone, Done, err)
			} else if err == nil {
				doneTo = Done
			}
		case !errors.Is(err, unix.ENOENT):
			return "", fmt.Errorf("announce %s: %w", stored, err)
		}
	}
	if doneTo != Inbox {
		if _, err := d.Announce(Inbox, name); err != nil {
			return "", fmt.Errorf("announce %s: %w", stored, err)
		}
	}
	return doneTo, d.Sync(Inbox, Done)
}

// finishReturns finishes the returns that a mover killed between its
// move and its announcement left in the directory sfd (a session's, or
// held/): marks lists the directory's marks, as recovery read them before
// it returned the session's claims. It reports the marks it finished; the
// others are stale (their file was returned again, with a mark of its
// own, or went elsewhere) or, in held/, may be those of a release under
// way.
func (d *Dir) finishReturns(sfd int, marks []string, announce Announcer) ([]string, error) {
	if announce == nil {
		return nil, nil
	}
	var finished []string
	for _, m := range marks {
		ino, err := strconv.ParseUint(strings.TrimPrefix(m, returnPrefix), 10, 64)
		if !strings.HasPrefix(m, returnPrefix) || err != nil {
			continue
		}
		stored, claimedDone, err := readReturnMark(sfd, m)
		if errors.Is(err, unix.ENOENT) || stored == "" {
			continue
		}
		if err != nil {
			return finished, fmt.Errorf("read return mark %s: %w", m, err)
		}
		var st unix.Stat_t
		if unix.Fstatat(d.fd(Inbox), stored, &st, unix.AT_SYMLINK_NOFOLLOW) != nil ||
			st.Ino != ino || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if _, err := d.announceReturn(sfd, stored, claimedDone, announce); err != nil {
			return finished, err
		}
		finished = append(finished, m)
	}
	return finished, nil
}

// finishStageReturns finishes the returns from held/ (spool release) and
// error/ (spool replay) that a kill cut short between the move and the
// announcement (finishReturns), and removes their marks. Recovery runs
// every second and error/ may hold many thousands of names, so a stage is
// listed only when its directory changed since it was last listed
// (returnsSeen): writing a mark, and the move that follows it, change it.
func (d *Dir) finishStageReturns(announce Announcer) error {
	if announce == nil {
		return nil
	}
	for i, fd := range []int{d.heldFD(), d.fd(Error)} {
		if fd < 0 {
			continue
		}
		if err := d.finishReturnsIn(fd, &d.returnsSeen[i], announce); err != nil {
			return err
		}
	}
	return nil
}

// settledAge is how old a directory's modification time must be for a
// listing to have seen every change it stands for: a coarse kernel clock
// may give a change made just after the listing the same time.
const settledAge = 2 * time.Second

// finishReturnsIn is finishStageReturns for the stage directory fd, whose
// modification time at its last complete listing is in seen (0: list it).
func (d *Dir) finishReturnsIn(fd int, seen *atomic.Int64, announce Announcer) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("finish releases: %w", err)
	}
	mtime := st.Mtim.Nano()
	if mtime == seen.Load() {
		return nil
	}
	names, err := readNames(fd)
	if err != nil {
		return fmt.Errorf("finish releases: %w", err)
	}
	finished, err := d.finishReturns(fd, names, announce)
	for _, m := range finished {
		if uerr := unix.Unlinkat(fd, m, 0); uerr != nil && !errors.Is(uerr, unix.ENOENT) && err == nil {
			err = uerr
		}
	}
	if err != nil {
		return fmt.Errorf("finish releases: %w", err)
	}
	if len(finished) == 0 && time.Since(time.Unix(0, mtime)) > settledAge {
		seen.Store(mtime)
	} else {
		seen.Store(0)
	}
	return nil
}

// writeReturnMark writes the return mark name into the directory sfd,
// holding stored and claimedDone, durably (the file, then the
// directory): the move it precedes must not be able to outlive it in a
// power cut.
func writeReturnMark(sfd int, name, stored, claimedDone string) error {
	fd, err := unix.Openat(sfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("write return mark: %w", err)
	}
	_, err = unix.Write(fd, []byte(stored+"\x00"+claimedDone))
	if err == nil {
		err = unix.Fsync(fd)
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Fsync(sfd)
	}
	if err != nil {
		return fmt.Errorf("write return mark: %w", err)
	}
	return nil
}

// readReturnMark returns the names a return mark holds: "" for a mark
// this code did not write.
func readReturnMark(sfd int, name string) (stored, claimedDone string, err error) {
	fd, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", "", err
	}
	defer unix.Close(fd)
	buf := make([]byte, 2*maxNameBytes+2)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return "", "", err
	}
	stored, claimedDone, _ = strings.Cut(string(buf[:n]), "\x00")
	if CheckName(stored) != nil || claimedDone != "" && CheckName(claimedDone) != nil {
		return "", "", nil
	}
	return stored, claimedDone, nil
}

// exists reports whether dirfd holds an entry name.
func exists(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// sameFile reports whether olddir/old and newdir/name are one file: the
// trace of a fallback move cut short (linkedAlready).
func sameFile(olddir int, old string, newdir int, name string) bool {
	var a, b unix.Stat_t
	return unix.Fstatat(olddir, old, &a, unix.AT_SYMLINK_NOFOLLOW) == nil &&
		unix.Fstatat(newdir, name, &b, unix.AT_SYMLINK_NOFOLLOW) == nil &&
		a.Dev == b.Dev && a.Ino == b.Ino
}
