package queue

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrNotMessageName is returned when a file to enqueue would not be a
// message in inbox/ (its name does not end in .json, or starts with ".").
var ErrNotMessageName = errors.New("not a message name (want NAME.json, not starting with '.')")

// WriteFile puts data into a stage under name, atomically and durably: it
// writes a hidden temp file in the stage, fsyncs and closes it, renames it in
// without replacing anything (a collision gets a "~N" suffix), and fsyncs the
// stage directory. Readers never see a partial file. It returns the name
// used. This is spool's one atomic-write recipe.
func (d *Dir) WriteFile(s Stage, name string, data []byte) (string, error) {
	return d.writeFrom(s, name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Enqueue copies the file at src into inbox/ as a new delivery, with
// WriteFile's guarantees; the message keeps src's base name, suffixed on a
// collision. src must be a regular file (a symlink to one is followed, as
// cp does); a FIFO or device is refused without blocking.
func (d *Dir) Enqueue(src string) (string, error) {
	name := filepath.Base(src)
	if !IsMessageName(name) {
		return "", fmt.Errorf("enqueue %s: %w", src, ErrNotMessageName)
	}
	f, err := os.OpenFile(src, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("enqueue: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("enqueue %s: %w", src, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("enqueue %s: %w", src, ErrNotRegular)
	}
	return d.writeFrom(Inbox, name, func(w io.Writer) error {
		_, err := io.Copy(w, f)
		return err
	})
}

func (d *Dir) writeFrom(s Stage, name string, fill func(io.Writer) error) (string, error) {
	dirfd := d.fd(s)
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	tmp := TempPrefix + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	// Held until the file is renamed or removed: a temp file whose lock is
	// free was left by a writer that died (RemoveStaleTemps).
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return "", fmt.Errorf("write %s: lock: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	fail := func(err error) (string, error) {
		f.Close()
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return "", fmt.Errorf("write %s/%s: %w", s, name, err)
	}
	if err := fill(f); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return "", fmt.Errorf("write %s/%s: %w", s, name, err)
	}
	final, err := moveUniqueAs(dirfd, tmp, dirfd, name)
	if err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return "", fmt.Errorf("write %s/%s: %w", s, name, err)
	}
	if err := unix.Fsync(dirfd); err != nil {
		return final, fmt.Errorf("write %s/%s: sync: %w", s, final, err)
	}
	return final, nil
}
