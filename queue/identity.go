//go:build linux

package queue

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// IDFile is the file in the queue directory that holds the queue's
// identity: 32 lower-case hex digits and a newline, made once by spool init
// (or by the first consumer of a queue made before identities existed) and
// never changed. The ledger records the same identity, so that a ledger is
// never used for another queue by mistake (docs/DESIGN.md, "Queue
// identity"). Copying a queue directory copies its identity: give a copy
// that is to be a queue of its own a new one by removing the file before
// its first use.
const IDFile = "queue.id"

// ErrBadID is wrapped by ID when queue.id does not hold an identity.
var ErrBadID = errors.New("not a queue identity")

// ID returns the queue's identity, or "" when it has none yet.
func (d *Dir) ID() (string, error) {
	fd, err := unix.Openat(d.root, IDFile, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return "", nil
	}
	if errors.Is(err, unix.ELOOP) {
		return "", fmt.Errorf("read %s: %w: it is a symlink, which is never followed", d.idPath(), ErrBadID)
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", d.idPath(), err)
	}
	f := os.NewFile(uintptr(fd), IDFile)
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return "", fmt.Errorf("read %s: %w", d.idPath(), err)
	} else if fi.IsDir() {
		return "", fmt.Errorf("read %s: %w: it is a directory", d.idPath(), ErrBadID)
	} else if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("read %s: %w: it is not a regular file", d.idPath(), ErrBadID)
	}
	b, err := io.ReadAll(io.LimitReader(f, 128))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", d.idPath(), err)
	}
	id := strings.TrimSuffix(string(b), "\n")
	if !validID(id) {
		return "", fmt.Errorf("read %s: %w: want 32 hex digits, have %q", d.idPath(), ErrBadID, clip(string(b), 40))
	}
	return id, nil
}

func (d *Dir) idPath() string { return d.path + "/" + IDFile }

// EnsureID gives the queue an identity if it has none, and returns the one
// it has. It is safe when several processes call it at once: the file is
// written aside and linked into place without replacing anything, so every
// caller returns the identity of whichever wrote first.
func (d *Dir) EnsureID() (string, error) {
	if id, err := d.ID(); err != nil || id != "" {
		return id, err
	}
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", fmt.Errorf("make queue identity: %w", err)
	}
	id := hex.EncodeToString(rnd[:])
	if err := d.writeRootFile(IDFile, []byte(id+"\n")); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return d.ID()
		}
		return "", fmt.Errorf("write %s: %w", d.idPath(), err)
	}
	return id, nil
}

// SetID writes id as the queue's identity; it fails with an error wrapping
// fs.ErrExist when the queue already has one. fsck --repair uses it to put
// back an identity the ledger knows after queue.id was lost.
func (d *Dir) SetID(id string) error {
	if !validID(id) {
		return fmt.Errorf("set queue identity: %w: %q", ErrBadID, id)
	}
	if err := d.writeRootFile(IDFile, []byte(id+"\n")); err != nil {
		return fmt.Errorf("write %s: %w", d.idPath(), err)
	}
	return nil
}

// writeRootFile creates name in the queue directory with data, durably and
// without replacing anything: EEXIST when name exists.
func (d *Dir) writeRootFile(name string, data []byte) error {
	_, err := writeAtomic(d.root, d.root, TempPrefix,
		func(f *os.File) error { _, err := f.Write(data); return err },
		func(tmp string) (string, error) { return name, renameNoReplace(d.root, tmp, d.root, name) })
	return err
}

func validID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range []byte(id) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// HasHistory reports whether done/ or error/ holds a message: the queue has
// been consumed before, so an empty ledger for it has lost its records. It
// stops at the first message, so it is cheap on a large queue.
func (d *Dir) HasHistory() (bool, error) {
	return d.holdsMessages(Done, Error)
}

// HasDone reports whether done/ holds a message: one a consumer recorded
// as processed, whose redelivery an empty ledger would process again. (A
// file in error/ may have been dropped there by hand.) It stops at the
// first message.
func (d *Dir) HasDone() (bool, error) {
	return d.holdsMessages(Done)
}

func (d *Dir) holdsMessages(stages ...Stage) (bool, error) {
	found := errors.New("found")
	for _, s := range stages {
		err := d.Scan(s, func([]string) error { return found })
		if errors.Is(err, found) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}
