//go:build linux

package queue

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// A session marks, in its own directory, each claim whose external call
// is about to start (MarkCalled), so that the recovery of a dead session
// tells the claims whose call may have started from those whose call
// never did (Recovered.Uncalled): only the first may still run at a
// server, and hold their msg_id. A mark is an empty file created before
// the call, without an fsync: a process killed keeps it (it is the
// kernel's), and only a crash of the machine can lose it. So the marks
// are trusted only in a session of this host and this boot: at Join the
// session writes the boot's identity (bootMark) into its directory, and a
// session that died in an earlier boot, or whose boot mark is missing,
// has every claim taken for called.
//
// Names starting with "." in a session directory are these marks, or
// return marks (returnmark.go), never claims: a claim has a message's
// name, which never starts with one.

const (
	calledPrefix = ".called."
	bootPrefix   = ".boot."
)

// bootID is the identity of the running boot of this host; "" when it
// cannot be read (then no session's marks are trusted).
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// isMark reports whether an entry of a session directory is a mark of the
// session, not a claim.
func isMark(name string) bool { return strings.HasPrefix(name, ".") }

// calledName is the mark of the call of the claim id of session.
func calledName(session, id string) string {
	return calledPrefix + strings.TrimPrefix(id, session+":")
}

// writeBootMark records the boot in the directory of a new session.
func writeBootMark(fd int) error {
	id := bootID()
	if id == "" {
		return nil
	}
	return createMark(fd, bootPrefix+id)
}

func createMark(fd int, name string) error {
	f, err := unix.Openat(fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	return unix.Close(f)
}

// MarkCalled records that the external call of c is about to start. It
// must return before the call starts: a claim without the mark is one
// whose call never started, whose msg_id a recovery releases at once.
func (s *Session) MarkCalled(c *Claim) error {
	if err := createMark(s.fd, calledName(s.id, c.ID)); err != nil {
		return fmt.Errorf("mark the call of %s: %w", c.Name, err)
	}
	return nil
}

// ClearCalled removes the mark of MarkCalled, once the call's outcome is
// committed (or the claim goes back uncalled): the claim's reservation is
// gone, and the mark must not outlive the claim in the directory.
func (s *Session) ClearCalled(c *Claim) error {
	err := unix.Unlinkat(s.fd, calledName(s.id, c.ID), 0)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("clear the call mark of %s: %w", c.Name, err)
	}
	return nil
}

// sessionMarks is what recovery reads of a dead session's marks.
type sessionMarks struct {
	trusted bool            // the session is of this host and boot
	called  map[string]bool // the marks of calls, by name
	names   []string        // every mark, to remove
}

// readMarks sorts the entries of a dead session's directory into its
// marks and its claims.
func readMarks(session string, entries []string) (sessionMarks, []string) {
	m := sessionMarks{called: map[string]bool{}}
	var claims []string
	boot := bootID()
	for _, e := range entries {
		if !isMark(e) {
			claims = append(claims, e)
			continue
		}
		m.names = append(m.names, e)
		switch {
		case strings.HasPrefix(e, calledPrefix):
			m.called[e] = true
		case boot != "" && e == bootPrefix+boot:
			m.trusted = sessionHost(session) == thisHost()
		}
	}
	return m, claims
}

// uncalled reports whether the claim id of session certainly never had its
// call started.
func (m sessionMarks) uncalled(session, id string) bool {
	return m.trusted && !m.called[calledName(session, id)]
}

// remove removes the marks, so that the directory can be.
func (m sessionMarks) remove(fd int) error {
	for _, n := range m.names {
		if err := unix.Unlinkat(fd, n, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	}
	return nil
}

// removeMarks removes the session's marks when it holds no claim any
// more, so that Close can remove its directory; with claims left, or a
// return whose announcement failed (a return mark), the marks stay for
// their recovery.
func (s *Session) removeMarks() error {
	entries, err := readNames(s.fd)
	if err != nil {
		return err
	}
	var m sessionMarks
	for _, e := range entries {
		if !isMark(e) || strings.HasPrefix(e, returnPrefix) {
			return nil
		}
		m.names = append(m.names, e)
	}
	return m.remove(s.fd)
}
