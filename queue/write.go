//go:build linux

package queue

import (
	"bufio"
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

// NameRefusal is the error a name Takes refuses is wrapped in:
// ErrNotMessageName, or for a queue of batch files ErrNotIncluded, since
// its names are its format's.
func (d *Dir) NameRefusal() error {
	if d.names != nil {
		return ErrNotIncluded
	}
	return ErrNotMessageName
}

// ErrNotIncluded is returned when a file to enqueue into a queue of batch
// files is not a name its format includes (spool.conf's include).
var ErrNotIncluded = errors.New("not a name the queue's format includes (spool.conf's include), or starts with '.'")

// WriteFile puts data into a stage under name, atomically and durably: it
// writes a hidden temp file, fsyncs and closes it, renames it in without
// replacing anything (a collision gets a "~N" suffix), and fsyncs the
// stage directory. Readers never see a partial file. It returns the name
// used. It and ReplaceFile share spool's one atomic-write recipe.
//
// The temp file of a write into inbox/ is made in inbox/, as producers'
// are; for any other stage it is made in the queue directory and renamed
// across (the stages and the queue directory are on one filesystem, which
// Open checks), so that done/ and error/ never hold one: a start sweeps
// stale temp files without reading the queue's history (RemoveStaleTemps).
func (d *Dir) WriteFile(s Stage, name string, data []byte) (string, error) {
	return d.writeFrom(s, name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Enqueue copies the file at src into inbox/ as a new delivery, with
// WriteFile's guarantees; the message keeps src's base name, suffixed on a
// collision. src must be a regular file (a symlink to one is followed, as
// cp does); a FIFO or device is refused without blocking. In a queue of
// files announced by done-files (SetAnnouncer) it then announces the file,
// under the name it got, durably: it was renamed in whole, so it is ready.
// A kill between the two leaves the file waiting for its done-file, which
// spool status shows.
func (d *Dir) Enqueue(src string) (string, error) {
	name := filepath.Base(src)
	if !d.Takes(name) {
		return "", fmt.Errorf("enqueue %s: %w", src, d.NameRefusal())
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
	final, err := d.writeFrom(Inbox, name, func(w io.Writer) error {
		_, err := io.Copy(w, f)
		return err
	})
	if err != nil {
		return final, err
	}
	if done := d.announce.of(final); done != "" {
		if _, err := d.Announce(Inbox, done); err != nil {
			return final, fmt.Errorf("enqueue %s: %w", src, err)
		}
		if err := d.Sync(Inbox); err != nil {
			return final, fmt.Errorf("enqueue %s: %w", src, err)
		}
	}
	return final, nil
}

// writeFrom is WriteFile with the content written by fill.
func (d *Dir) writeFrom(s Stage, name string, fill func(io.Writer) error) (string, error) {
	dirfd, tmpfd := d.fd(s), d.fd(s)
	if s != Inbox {
		tmpfd = d.root
	}
	final, err := writeAtomic(tmpfd, dirfd, TempPrefix,
		func(f *os.File) error { return fill(f) },
		// Nothing in a stage is ever replaced: a collision is kept under a
		// suffixed name.
		func(tmp string) (string, error) { return moveUniqueAs(tmpfd, tmp, dirfd, name) })
	if err != nil {
		if final != "" {
			name = final
		}
		return final, fmt.Errorf("write %s/%s: %w", s, name, err)
	}
	return final, nil
}

// ReplaceFile writes what fill produces to the file at path, replacing
// any file there, atomically and durably: fill writes (buffered) into a
// hidden temp file in path's directory, which is fsynced, closed and
// renamed over path, and then the directory is fsynced. A reader of path
// sees the old content or the new, never a part, and once ReplaceFile
// returns nil the new content survives a power cut. On error path is left
// as it was and the temp file is removed.
//
// The file gets mode 0644 whatever the umask: it is output meant for
// everyone who may read the directory. It is for files outside a queue's
// stages (reports, exports); a message goes into a stage with
// Dir.WriteFile, which never replaces.
func ReplaceFile(path string, fill func(io.Writer) error) error {
	dir, base := filepath.Dir(path), filepath.Base(path)
	dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, &os.PathError{Op: "open", Path: dir, Err: err})
	}
	_, err = writeAtomic(dirfd, dirfd, "."+base+".tmp-",
		func(f *os.File) error {
			bw := bufio.NewWriter(f)
			if err := fill(bw); err != nil {
				return err
			}
			if err := bw.Flush(); err != nil {
				return err
			}
			return f.Chmod(0o644)
		},
		// To path as given, not dir/base: "-o out/" must fail as it did,
		// not become out/out.
		func(tmp string) (string, error) { return path, unix.Renameat(dirfd, tmp, unix.AT_FDCWD, path) })
	if cerr := unix.Close(dirfd); cerr != nil && err == nil {
		err = fmt.Errorf("close %s: %w", dir, cerr)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeAtomic is spool's one atomic-write recipe: it creates a hidden temp
// file in the directory tmpdir named prefix and a random suffix, lets fill
// write it, fsyncs and closes it, lets publish rename it to its final name
// (publish decides whether an existing file may be replaced, and returns
// the name used), and fsyncs the directory dest it was renamed into (and
// tmpdir, when that is another) so the rename survives a power cut. Until
// publish succeeds a failure removes the temp file and returns "" as the
// name; a failure to fsync returns the name the file was published under
// with the error.
func writeAtomic(tmpdir, dest int, prefix string, fill func(*os.File) error, publish func(tmp string) (string, error)) (string, error) {
	final, err := writeUnsynced(tmpdir, dest, prefix, fill, publish)
	if err != nil {
		return final, err
	}
	return final, syncDirs(tmpdir, dest)
}

// writeUnsynced is writeAtomic up to the publish, its content synced
// first, without syncing the directories after it: for several files
// published at once, whose directories are synced once after the last
// (syncDirs).
func writeUnsynced(tmpdir, dest int, prefix string, fill func(*os.File) error, publish func(tmp string) (string, error)) (string, error) {
	f, err := createTemp(tmpdir, prefix)
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	fail := func(err error) (string, error) {
		_ = unix.Unlinkat(tmpdir, tmp, 0) // the error that matters is err
		return "", err
	}
	if err := fill(f); err != nil {
		_ = f.Close() // the error that matters is fill's
		return fail(err)
	}
	if err := syncFile(f); err != nil {
		_ = f.Close() // the error that matters is Sync's
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	final, err := publish(tmp)
	if err != nil {
		return fail(err)
	}
	return final, nil
}

// syncFile and syncDir are fsync(2) of a written file and of a directory,
// variables so that a test can fail them or watch their order.
var (
	syncFile = (*os.File).Sync
	syncDir  = unix.Fsync
)

// createTemp creates a hidden temp file in the directory tmpdir, named
// prefix and a random suffix, and locks it; the file's Name is that name.
// The lock is held until the file is published or removed: a temp file
// whose lock is free was left by a writer that died (RemoveStaleTemps).
func createTemp(tmpdir int, prefix string) (*os.File, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	tmp := prefix + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(tmpdir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		_ = unix.Close(fd) // the error that matters is the lock's
		_ = unix.Unlinkat(tmpdir, tmp, 0)
		return nil, fmt.Errorf("lock: %w", err)
	}
	return os.NewFile(uintptr(fd), tmp), nil
}

// syncDirs fsyncs dest, where writeUnsynced published, then tmpdir,
// where its temp file was, when it is another directory.
func syncDirs(tmpdir, dest int) error {
	if err := syncDir(dest); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if tmpdir != dest {
		if err := syncDir(tmpdir); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
	}
	return nil
}
