//go:build linux

package queue

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DeadClaim is a claim in processing/ whose consumer is gone, as
// DeadClaims finds it without touching it.
type DeadClaim struct {
	// Session is the dead consumer's session directory in processing/.
	Session string
	// Name is the claimed file's name.
	Name string
}

// DeadClaims lists the claims that Recover, with the same lease, would take
// over now: in sessions of this host whose lock is free, and in sessions of
// other hosts whose lease is also older than lease. It moves nothing, and
// holds no session's lock for longer than it takes to test it.
func (d *Dir) DeadClaims(lease time.Duration) ([]DeadClaim, error) {
	host := thisHost()
	proc := d.fd(Processing)
	names, err := readNames(proc)
	if err != nil {
		return nil, fmt.Errorf("list dead claims: %w", err)
	}
	var out []DeadClaim
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(proc, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue // gone, or not a session (Recover returns stray messages to inbox/)
		}
		if sessionHost(name) != host && time.Since(time.Unix(st.Mtim.Unix())) < lease {
			continue
		}
		fd, err := unix.Openat(proc, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Close(fd)
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue // alive
			}
			return nil, fmt.Errorf("list dead claims: %s: lock: %w", name, err)
		}
		claims, err := readNames(fd)
		unix.Close(fd) // releases the lock
		if err != nil {
			return nil, fmt.Errorf("list dead claims: %s: %w", name, err)
		}
		for _, c := range claims {
			if !isMark(c) {
				out = append(out, DeadClaim{Session: name, Name: c})
			}
		}
	}
	return out, nil
}

// ClaimFile is a file in processing/: a claim inside a session, live or
// dead, or a message left there directly.
type ClaimFile struct {
	Name string
	Ino  uint64
}

// ClaimFiles returns every file in processing/: the claims inside every
// session, live or dead, and any message left there directly.
func (d *Dir) ClaimFiles() ([]ClaimFile, error) {
	proc := d.fd(Processing)
	names, err := readNames(proc)
	if err != nil {
		return nil, fmt.Errorf("list claims: %w", err)
	}
	var out []ClaimFile
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(proc, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			out = append(out, ClaimFile{Name: name, Ino: st.Ino})
			continue
		}
		fd, err := unix.Openat(proc, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		claims, err := readNames(fd)
		for _, c := range claims {
			if !isMark(c) && unix.Fstatat(fd, c, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				out = append(out, ClaimFile{Name: c, Ino: st.Ino})
			}
		}
		unix.Close(fd)
		if err != nil {
			return nil, fmt.Errorf("list claims of %s: %w", name, err)
		}
	}
	return out, nil
}
