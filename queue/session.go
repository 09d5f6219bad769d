//go:build linux

package queue

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ErrGone is returned by Claim when the message is no longer in inbox/:
// another consumer claimed it first (or it was removed). Skip it.
var ErrGone = errors.New("message gone from inbox")

// ErrBusy is returned by Claim when this session already holds a claim of
// the same name; the newer file stays in inbox/ to be claimed later, since a
// claim never clobbers an in-flight file.
var ErrBusy = errors.New("a claim of the same name is in flight")

// ErrNotRegular is returned by Claim.Read for a symlink, FIFO, device or
// directory: it is never opened or followed.
var ErrNotRegular = errors.New("not a regular file")

// TooLargeError is returned by Claim.Read for a file over the size limit.
type TooLargeError struct{ Size, Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%d bytes, over the %d-byte limit", e.Size, e.Limit)
}

// joinPrefix marks a session directory that is being created. It is made
// in the queue directory, not in processing/, and renamed into processing/
// only once locked: a recovering consumer never mistakes a newborn session
// for a dead one, and a consumer killed while joining leaves processing/
// clean (I5). Recover removes such leftovers once they are stale.
const joinPrefix = ".join-"

// Session is one consumer's presence in processing/: a directory of its own,
// processing/<id>/, on which it holds an exclusive flock for its whole life.
// The kernel drops the lock when the process dies, however it dies, which is
// how the next consumer knows at once that the claims inside are orphans
// (I5). A Session is used by one consumer; Claim, Read and Finish may be
// called from several goroutines.
type Session struct {
	d  *Dir
	id string
	fd int // the session directory, flocked
	// cold counts Reads that found the file's data outside the page cache.
	cold atomic.Int64
	// calls is the session's calls lock once taken (CallsLock), under
	// callsMu.
	callsMu sync.Mutex
	calls   *os.File
}

// Join creates and locks this consumer's claim directory in processing/.
func (d *Dir) Join() (*Session, error) {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	id := fmt.Sprintf("%s-%d@%s", hex.EncodeToString(rnd[:]), os.Getpid(), thisHost())
	proc := d.fd(Processing)
	tmp := joinPrefix + id
	if err := unix.Mkdirat(d.root, tmp, 0o755); err != nil {
		return nil, fmt.Errorf("join: create %s: %w", tmp, err)
	}
	fd, err := unix.Openat(d.root, tmp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = unix.Unlinkat(d.root, tmp, unix.AT_REMOVEDIR)
		return nil, fmt.Errorf("join: open %s: %w", tmp, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		_ = unix.Unlinkat(d.root, tmp, unix.AT_REMOVEDIR)
		return nil, fmt.Errorf("join: lock %s: %w", tmp, err)
	}
	if err := renameNoReplace(d.root, tmp, proc, id); err != nil {
		unix.Close(fd)
		_ = unix.Unlinkat(d.root, tmp, unix.AT_REMOVEDIR)
		return nil, fmt.Errorf("join: publish %s: %w", id, err)
	}
	if err := unix.Fsync(proc); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("join: sync processing: %w", err)
	}
	// After the publication, so that a stale join holds nothing but
	// itself; a session killed before it has its marks distrusted.
	if err := writeBootMark(fd); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("join: %w", err)
	}
	return &Session{d: d, id: id, fd: fd}, nil
}

// ID identifies the session (random, pid and host) for the ledger.
func (s *Session) ID() string { return s.id }

// Claim is one message claimed by a session: the file now sits in
// processing/<session>/<Name>.
type Claim struct {
	// Name is the message's name in inbox/.
	Name string
	// ID is the identity of this claim (session, inode, change time): unique
	// across claims, and derivable again from the file while it sits in the
	// claim directory, so recovery can ask the ledger what became of it (I7).
	ID string
	// Ino is the file's inode number.
	Ino uint64
	// Mode is the file type (from lstat: a symlink is reported as such).
	Mode uint32
	// Size is the file's size in bytes as the claim found it.
	Size int64
	// Mtime is the file's modification time as the claim found it: with
	// Size, what Session.Changed compares against, and how recently a
	// producer last wrote into the file before it was claimed.
	Mtime time.Time
}

// Regular reports whether the claimed entry is a regular file.
func (c *Claim) Regular() bool { return c.Mode&unix.S_IFMT == unix.S_IFREG }

// claimID derives a claim's identity from its session and the claimed
// file's inode and change time. The rename into the claim directory sets
// the change time, so a later claim of a file under the same name, even a
// byte-identical redelivery or a reused inode, gets another identity.
func claimID(session string, st *unix.Stat_t) string {
	// One allocation, not four: every message's claim makes one.
	var b strings.Builder
	b.Grow(len(session) + 3 + 20 + 20 + 9)
	b.WriteString(session)
	b.WriteByte(':')
	var num [20]byte
	b.Write(strconv.AppendUint(num[:0], st.Ino, 10))
	b.WriteByte(':')
	b.Write(strconv.AppendInt(num[:0], st.Ctim.Sec, 10))
	b.WriteByte('.')
	b.Write(strconv.AppendInt(num[:0], st.Ctim.Nsec, 10))
	return b.String()
}

// ClaimInode returns the inode number of the file a claim identity was
// made from (Claim.ID; a batch file's record, ID#index, names its batch
// file's), and false when id is not of that shape: for a report that
// looks for the file of a claim the ledger names (LocateAll).
func ClaimInode(id string) (uint64, bool) {
	if i := strings.LastIndexByte(id, '#'); i >= 0 {
		id = id[:i]
	}
	i := strings.LastIndexByte(id, ':') // the change time
	if i < 0 {
		return 0, false
	}
	j := strings.LastIndexByte(id[:i], ':')
	if j < 0 {
		return 0, false
	}
	ino, err := strconv.ParseUint(id[j+1:i], 10, 64)
	return ino, err == nil && ino != 0
}

// Claim atomically moves inbox/name into the session's directory. It
// returns ErrGone when another consumer won the race, ErrBusy when a claim
// of the same name is already in flight in this session.
func (s *Session) Claim(name string) (*Claim, error) {
	err := renameNoReplace(s.d.fd(Inbox), name, s.fd, name)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, ErrGone
	case errors.Is(err, unix.EEXIST):
		return nil, ErrBusy
	case err != nil:
		return nil, fmt.Errorf("claim %s: %w", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(s.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, fmt.Errorf("claim %s: stat: %w", name, err)
	}
	return &Claim{Name: name, ID: claimID(s.id, &st), Ino: st.Ino, Mode: st.Mode, Size: st.Size,
		Mtime: time.Unix(st.Mtim.Unix())}, nil
}

// Changed reports whether the claimed file's size or modification time
// differs now from what the claim found: a producer that writes into
// inbox/ in place, under the message's final name, goes on writing into
// the file after it was claimed. It stats the file in the session's own
// directory, where nothing but this session moves it.
func (s *Session) Changed(c *Claim) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(s.fd, c.Name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false, fmt.Errorf("stat claim %s: %w", c.Name, err)
	}
	return st.Size != c.Size || !time.Unix(st.Mtim.Unix()).Equal(c.Mtime), nil
}

// Read returns the content of a claimed regular file, up to limit bytes.
// It never follows a symlink and never blocks on a FIFO: anything but a
// regular file is ErrNotRegular without being opened, and a file over the
// limit is a *TooLargeError without being read.
func (s *Session) Read(c *Claim, limit int64) ([]byte, error) {
	return readAt(s.fd, c, limit, &s.cold)
}

// ColdReads is how many of the session's Reads found the file's data
// outside the page cache, and so waited for the disk. It is an estimate:
// now and then a read of a file that was not cached succeeds without
// waiting (one in a few hundred, in the tests; whole runs of them while
// other processes keep the disk busy, when the kernel's own read-ahead
// finishes within the call). A consumer watches it to
// decide whether to Prefetch what it claims next.
func (s *Session) ColdReads() int64 { return s.cold.Load() }

// readAt reads a file of dirfd. cold is set only for a claim in a session
// directory (private to this consumer): its first read(2) then counts into
// cold whether the data was cached. Outside a claim directory (cold nil)
// the entry may have been replaced since it was listed, so what was opened
// is checked first.
func readAt(dirfd int, c *Claim, limit int64, cold *atomic.Int64) ([]byte, error) {
	if !c.Regular() {
		return nil, ErrNotRegular
	}
	if c.Size > limit {
		return nil, &TooLargeError{Size: c.Size, Limit: limit}
	}
	fd, err := openat(dirfd, c.Name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, ErrNotRegular
		}
		return nil, fmt.Errorf("read %s: %w", c.Name, err)
	}
	defer unix.Close(fd) // read-only: a close error loses nothing
	size := c.Size
	if cold == nil {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, fmt.Errorf("read %s: %w", c.Name, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil, ErrNotRegular
		}
		size = st.Size
	}
	// Plain read(2) on the descriptor: an *os.File would try to register a
	// regular file with the poller (two wasted system calls a message).
	// Read one byte past the limit, so a file that grew since the claim (a
	// producer still writing into inbox/ directly) is still caught.
	buf, err := readFd(fd, make([]byte, 0, min(size, limit)+1), limit+1, size, cold)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c.Name, err)
	}
	if int64(len(buf)) > limit {
		return nil, &TooLargeError{Size: int64(len(buf)), Limit: limit}
	}
	return buf, nil
}

// readFd reads fd to its end, or to max bytes, into buf. size is the
// file's size as fstat last saw it: a read that stops short of what was
// asked exactly there has met the end of the file, so the read(2) that
// would return 0 to say so is skipped (one system call in about eight of a
// message's). A file that grew since the fstat returns more than size and
// is read on to its end as before.
//
// If cold is set, the first read asks the kernel not to wait for the disk
// (RWF_NOWAIT): when the data is not cached it counts one into cold and
// reads again, waiting. That costs nothing when the data is cached and one
// failed system call when it is not, against a wait for the disk.
func readFd(fd int, buf []byte, max, size int64, cold *atomic.Int64) ([]byte, error) {
	probe := cold != nil && !noWaitUnsupported.Load()
	for int64(len(buf)) < max {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := min(int64(cap(buf)-len(buf)), max-int64(len(buf)))
		into := buf[len(buf) : len(buf)+int(room)]
		var n int
		var err error
		if probe {
			probe = false
			n, err = readNoWait(fd, into)
			if errors.Is(err, unix.EAGAIN) {
				cold.Add(1)
				continue
			}
		} else {
			n, err = unix.Read(fd, into)
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return buf, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if int64(n) < room && int64(len(buf)) == size {
			return buf, nil
		}
	}
	return buf, nil
}

// Finish moves a claimed file to done/ or error/, keeping both files on a
// name collision; it returns the name the file got there. The caller must
// have committed the claim's outcome durably first (I3, I4).
func (s *Session) Finish(c *Claim, to Stage) (string, error) {
	return s.FinishAs(c, to, c.Name)
}

// FreeName is the name Finish would give c in stage to now: its own when
// to holds no entry of that name, else the first free suffixed one
// (a~2.json). A batch file's done-file is moved first under the name that
// announces it (FinishAs), so that the pair keeps matching names whatever
// the collisions; a name taken between the two moves only costs the match.
// With announce (the done-file's name of a name, "" for none), a name is
// free only when its done-file's name is free too: a done-file left in to
// by a finish killed between its two moves, or by hand, then stays as it
// is, and the pair still matches under the next suffix.
func (s *Session) FreeName(c *Claim, to Stage, announce Announcer) string {
	fd := s.d.fd(to)
	free := func(name string) bool {
		var st unix.Stat_t
		if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			return false
		}
		done := announce.of(name)
		return done == "" || unix.Fstatat(fd, done, &st, unix.AT_SYMLINK_NOFOLLOW) != nil
	}
	if free(c.Name) {
		return c.Name
	}
	for n := 2; n < maxSuffixTries; n++ {
		if cand := suffixed(c.Name, n); free(cand) {
			return cand
		}
	}
	return c.Name // Finish searches again, and fails as it must
}

// FinishAs is Finish with the name c should get in stage to (suffixed
// all the same when it is taken).
func (s *Session) FinishAs(c *Claim, to Stage, name string) (string, error) {
	if to != Done && to != Error && to != Inbox {
		return "", fmt.Errorf("finish %s: cannot move to %s", c.Name, to)
	}
	if err := CheckName(name); err != nil {
		return "", fmt.Errorf("finish %s: %w", c.Name, err)
	}
	final, err := moveUniqueAs(s.fd, c.Name, s.d.fd(to), name)
	if err != nil {
		return "", fmt.Errorf("finish %s to %s: %w", c.Name, to, err)
	}
	return final, nil
}

// Sync makes the session's claims durable (fsync of its directory), so a
// claim recorded in the ledger cannot be undone by a power cut.
func (s *Session) Sync() error {
	if err := unix.Fsync(s.fd); err != nil {
		return fmt.Errorf("sync claims: %w", err)
	}
	return nil
}

// Touch renews the session's lease (its directory's modification time), so
// that consumers on other hosts, which cannot see its lock, leave its
// claims alone while it lives.
func (s *Session) Touch() error {
	now := time.Now()
	ts := []unix.Timespec{unix.NsecToTimespec(now.UnixNano()), unix.NsecToTimespec(now.UnixNano())}
	if err := unix.UtimesNanoAt(s.d.fd(Processing), s.id, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("renew lease: %w", err)
	}
	return nil
}

// Close removes the session's directory, which must be empty (every claim
// finished), and releases its lock, and closes its calls lock (CallsLock),
// removing it. A session with claims left in flight keeps its directory,
// and its calls lock: the next consumer recovers them, and holds their
// msg_ids while the processes of their calls hold the lock.
func (s *Session) Close() error {
	if s.fd < 0 {
		return nil
	}
	proc := s.d.fd(Processing)
	err := s.removeMarks()
	if err == nil {
		err = unix.Unlinkat(proc, s.id, unix.AT_REMOVEDIR)
	}
	clean := err == nil || errors.Is(err, unix.ENOENT)
	if !clean {
		err = fmt.Errorf("close session %s: %w", s.id, err)
	} else {
		err = nil
		if serr := unix.Fsync(proc); serr != nil {
			err = fmt.Errorf("close session: sync processing: %w", serr)
		}
	}
	// After the directory: a session killed in between leaves a lock
	// that recovery removes as soon as it holds no reservation.
	if cerr := s.closeCallsLock(clean); cerr != nil && err == nil {
		err = fmt.Errorf("close session %s: %w", s.id, cerr)
	}
	if cerr := unix.Close(s.fd); cerr != nil && err == nil {
		err = fmt.Errorf("close session %s: %w", s.id, cerr)
	}
	s.fd = -1
	return err
}

// HasSession reports whether processing/ holds the directory of the
// session id: a live session's always is there; a dead one's until it is
// recovered.
func (d *Dir) HasSession(id string) (bool, error) {
	if err := checkSessionName(id); err != nil {
		return false, err
	}
	var st unix.Stat_t
	err := unix.Fstatat(d.fd(Processing), id, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("session %s: %w", id, err)
	}
	return true, nil
}
