//go:build linux

package queue

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// A session whose external calls run as processes of this kernel (an
// Exec's) holds a calls lock: the file CallsLockDir/<session> in the
// queue directory, which holds the identity of the boot that made it. The
// consumer opens it, takes a shared flock on it, and hands the open file
// to every process a call starts, which inherits it, and so do the
// processes those start. A flock belongs to the open file, which all those
// descriptors share, and the kernel drops it only when the last of them
// is closed: when the consumer and every process of its calls are gone,
// however they died, in whatever PID namespace they run. A recovering
// consumer that takes the lock (exclusive, without waiting) after the
// session's death has proved its calls gone (ProbeCalls), where a search
// of /proc proves only what this PID namespace can see.
//
// The lock proves something only to a process of the kernel that holds
// it, so ProbeCalls trusts a lock file only if it names this boot
// (/proc/sys/kernel/random/boot_id, which containers share with their
// host and a reboot or another machine changes): host names can be
// shared by containers of different machines, and a flock on a network
// filesystem may be another machine's or local to each. A lock of
// another boot, or no lock, says nothing, and the caller falls back on
// time. Nothing is synced: a crash of the machine ends every process the
// lock could speak for, and the lock it leaves names an earlier boot.
//
// The file must outlive the session directory, which recovery removes
// while the calls may still run, so it lives beside processing/, in a
// directory of the queue's whose name starts with "." (no stage, temp file
// or session name does). A session that closes cleanly removes its own;
// the lock of a dead session goes with its reservations (RemoveCallsLock),
// or once it has none (DeadCallsLocks lists them).

// CallsLockDir is the directory of the queue that holds the sessions'
// calls locks, created at the first one.
const CallsLockDir = ".calls"

// CallsState is what a dead session's calls lock says of its calls.
type CallsState int

// The states ProbeCalls reports.
const (
	// CallsUnknown: the session has no calls lock of this boot (its
	// Caller does not pass one on, it is of an older spool or another
	// machine, or it died before its first call): the lock says nothing.
	CallsUnknown CallsState = iota
	// CallsRunning: a process still holds the lock.
	CallsRunning
	// CallsGone: no process holds it: none of the session's calls, nor
	// anything they started and that kept it open, runs any more.
	CallsGone
)

func (s CallsState) String() string {
	switch s {
	case CallsRunning:
		return "running"
	case CallsGone:
		return "gone"
	}
	return "unknown"
}

// CallsLock returns the session's calls lock, creating it at the first
// call: an open file, shared-locked, to pass to every process a call
// starts (see CallsLockDir), which must keep it open as long as it runs.
// It is the same file until Close; the caller must not close it. A
// session takes one only if every call it makes passes the lock on: its
// presence tells recovery that a free lock means no call is left.
func (s *Session) CallsLock() (*os.File, error) {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	if s.calls != nil {
		return s.calls, nil
	}
	if s.fd < 0 {
		return nil, fmt.Errorf("calls lock of %s: session closed", s.id)
	}
	f, err := s.d.createCallsLock(s.id)
	if err != nil {
		return nil, fmt.Errorf("calls lock of %s: %w", s.id, err)
	}
	s.calls = f
	return f, nil
}

// createCallsLock creates, fills and locks the calls lock of session. The
// boot is written before the lock is taken and any call can start: a
// session killed in between has made no call, and its lock is free.
func (d *Dir) createCallsLock(session string) (*os.File, error) {
	dirfd, err := d.callsDir(true)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dirfd)
	w, err := unix.Openat(dirfd, session, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, err
	}
	_, err = unix.Write(w, []byte(bootID()+"\n"))
	if cerr := unix.Close(w); err == nil {
		err = cerr
	}
	if err == nil {
		// Read-only for the processes that inherit it: they hold it,
		// they have nothing to write into it.
		var fd int
		if fd, err = unix.Openat(dirfd, session, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
			if err = unix.Flock(fd, unix.LOCK_SH); err == nil {
				return os.NewFile(uintptr(fd), CallsLockDir+"/"+session), nil
			}
			unix.Close(fd)
		}
	}
	_ = unix.Unlinkat(dirfd, session, 0) // nothing was called under it
	return nil, err
}

// callsDir opens CallsLockDir, creating it first if create is set. It
// returns unix.ENOENT when it does not exist and create is not set.
func (d *Dir) callsDir(create bool) (int, error) {
	if create {
		if err := unix.Mkdirat(d.root, CallsLockDir, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, err
		}
	}
	return unix.Openat(d.root, CallsLockDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// closeCallsLock closes the session's calls lock at Close, and removes it
// too when the session ended clean (its directory removed: no claim left,
// so no reservation of it waits for the proof). Processes of its calls
// that still hold the file keep the lock.
func (s *Session) closeCallsLock(clean bool) error {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	if s.calls == nil {
		return nil
	}
	var err error
	if clean {
		err = s.d.RemoveCallsLock(s.id)
	}
	if cerr := s.calls.Close(); err == nil {
		err = cerr
	}
	s.calls = nil
	return err
}

// ProbeCalls tells whether the calls of session, a session found dead
// (its directory gone from processing/), may still run: it takes the
// session's calls lock exclusively without waiting, and lets it go at
// once. The answer is CallsUnknown without a lock of this boot. For a
// live session it is CallsRunning, or CallsGone before its first call.
// A process that closed its descriptors, or gave the lock up (flock
// LOCK_UN on the inherited descriptor), is not seen.
func (d *Dir) ProbeCalls(session string) (CallsState, error) {
	if err := checkSessionName(session); err != nil {
		return CallsUnknown, fmt.Errorf("probe calls: %w", err)
	}
	dirfd, err := d.callsDir(false)
	if errors.Is(err, unix.ENOENT) {
		return CallsUnknown, nil
	}
	if err != nil {
		return CallsUnknown, fmt.Errorf("probe calls of %s: %w", session, err)
	}
	defer unix.Close(dirfd)
	fd, err := unix.Openat(dirfd, session, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return CallsUnknown, nil
	case err != nil:
		return CallsUnknown, fmt.Errorf("probe calls of %s: %w", session, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return CallsUnknown, fmt.Errorf("probe calls of %s: %w", session, err)
	}
	boot := bootID()
	if st.Mode&unix.S_IFMT != unix.S_IFREG || boot == "" {
		return CallsUnknown, nil
	}
	buf := make([]byte, 128)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return CallsUnknown, fmt.Errorf("probe calls of %s: %w", session, err)
	}
	if strings.TrimSpace(string(buf[:n])) != boot {
		return CallsUnknown, nil // another boot's or machine's, or half written
	}
	switch err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); {
	case err == nil:
		return CallsGone, nil // released with fd
	case errors.Is(err, unix.EWOULDBLOCK):
		return CallsRunning, nil
	default:
		return CallsUnknown, fmt.Errorf("probe calls of %s: lock: %w", session, err)
	}
}

// RemoveCallsLock removes the calls lock of session, if it has one: once
// the reservations it vouched for are released, or the session closed
// clean.
func (d *Dir) RemoveCallsLock(session string) error {
	if err := checkSessionName(session); err != nil {
		return fmt.Errorf("remove calls lock: %w", err)
	}
	dirfd, err := d.callsDir(false)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove calls lock of %s: %w", session, err)
	}
	defer unix.Close(dirfd)
	if err := unix.Unlinkat(dirfd, session, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove calls lock of %s: %w", session, err)
	}
	return nil
}

// DeadCallsLocks lists the sessions that have a calls lock but no
// directory in processing/ any more: dead and recovered (or closed, and
// killed before removing their lock). Their locks are needed only while
// they hold reservations; the others' may be removed (RemoveCallsLock).
// A session whose directory is gone cannot take a reservation any more,
// so one that held none after this was called never will.
func (d *Dir) DeadCallsLocks() ([]string, error) {
	dirfd, err := d.callsDir(false)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list calls locks: %w", err)
	}
	defer unix.Close(dirfd)
	names, err := readNames(dirfd)
	if err != nil {
		return nil, fmt.Errorf("list calls locks: %w", err)
	}
	var gone []string
	for _, n := range names {
		if checkSessionName(n) != nil {
			continue
		}
		live, err := d.HasSession(n)
		if err != nil {
			return nil, fmt.Errorf("list calls locks: %w", err)
		}
		if !live {
			gone = append(gone, n)
		}
	}
	return gone, nil
}

// checkSessionName refuses what cannot name a session directory.
func checkSessionName(id string) error {
	if id == "" || strings.ContainsRune(id, '/') || strings.HasPrefix(id, ".") {
		return fmt.Errorf("session %q: not a session name", id)
	}
	return nil
}
