//go:build linux

package queue

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Open opens a claimed regular file for reading, for a reader that reads
// it piece by piece (a batch file's records) rather than whole (Read). It
// never follows a symlink nor blocks on a FIFO: anything but a regular
// file is ErrNotRegular. The caller closes the file.
func (s *Session) Open(c *Claim) (*os.File, error) {
	if !c.Regular() {
		return nil, ErrNotRegular
	}
	fd, err := unix.Openat(s.fd, c.Name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, ErrNotRegular
		}
		return nil, fmt.Errorf("open claim %s: %w", c.Name, err)
	}
	return os.NewFile(uintptr(fd), c.Name), nil
}

// WriteStage is WriteFile with the content written by fill, returning the
// inode of the file written besides its name: for a batch file's record
// dead letter, which the ledger records by that inode.
func (d *Dir) WriteStage(s Stage, name string, fill func(io.Writer) error) (string, uint64, error) {
	stored, err := d.writeFrom(s, name, fill)
	if err != nil {
		return stored, 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd(s), stored, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return stored, 0, fmt.Errorf("stat %s/%s: %w", s, stored, err)
	}
	return stored, st.Ino, nil
}

// StageFile is one file for WriteStageFiles: the name it is wanted
// under, and what writes its content. The Fills of one call may run at
// once, each on its own file.
type StageFile struct {
	Name string
	Fill func(io.Writer) error
}

// WriteStageFiles is WriteStage for several files of stage s at once,
// with the same care, done in passes so that the files share the disk's
// work: every file is written into a temp file in the queue directory
// and fsynced, up to stageWriters at once; once all are, each is
// renamed into s without replacing (a collision gets a suffixed name);
// then s and the queue directory are fsynced, once. No file is in s before
// its content is durable, and once it returns nil every file survives a
// power cut. It returns each file's stored name and inode, in order. The
// passes run over up to stageGroup files at a time, as each holds an open
// file until it is renamed.
//
// On an error the files renamed in before it stay, the directories synced
// as far as they could be, the temp files not yet renamed are removed, and
// the error names the file.
func (d *Dir) WriteStageFiles(s Stage, files []StageFile) ([]StoredCopy, error) {
	out := make([]StoredCopy, 0, len(files))
	dirfd, tmpfd := d.fd(s), d.fd(s)
	if s != Inbox {
		tmpfd = d.root
	}
	var err error
	for lo := 0; lo < len(files) && err == nil; lo += stageGroup {
		var stored []StoredCopy
		stored, err = writeGroup(tmpfd, dirfd, s, files[lo:min(lo+stageGroup, len(files))])
		out = append(out, stored...)
	}
	if len(out) > 0 {
		if serr := syncDirs(tmpfd, dirfd); serr != nil && err == nil {
			err = fmt.Errorf("write %s: %w", s, serr)
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// stageGroup is how many files WriteStageFiles holds open at once: a
// chunk of records all of them dead letters stays within any limit on
// open files.
const stageGroup = 64

// stageWriters is how many of WriteStageFiles's files are written and
// fsynced at once: their creates and their waits on the disk overlap (one
// after another, a drain of 1% poison records waited on them: 1.2-2.3 ms
// a file here, 0.16-0.17 ms four at once).
const stageWriters = 4

// writeGroup writes files into temp files in tmpfd and fsyncs each, up to
// stageWriters at once, and once all are synced renames each into dirfd,
// the directory of stage s, returning those it renamed; the directories
// are left to sync (syncDirs).
func writeGroup(tmpfd, dirfd int, s Stage, files []StageFile) ([]StoredCopy, error) {
	temps := make([]*os.File, len(files))
	// remove closes and removes the temp files of temps from i on, none
	// of them renamed.
	remove := func(i int) {
		for _, f := range temps[i:] {
			if f != nil {
				_ = f.Close()                         // removed below: nothing of it is kept
				_ = unix.Unlinkat(tmpfd, f.Name(), 0) // the error that matters is the caller's
			}
		}
	}
	k := min(stageWriters, len(files))
	errs := make([]error, k)
	var wg sync.WaitGroup
	for g := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(files); i += k {
				f, err := createTemp(tmpfd, TempPrefix)
				if err == nil {
					temps[i] = f
					err = files[i].Fill(f)
				}
				if err == nil {
					err = syncFile(f)
				}
				if err != nil {
					errs[g] = fmt.Errorf("write %s/%s: %w", s, files[i].Name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		remove(0)
		return nil, err
	}
	out := make([]StoredCopy, 0, len(files))
	for i, f := range temps {
		var st unix.Stat_t
		err := unix.Fstat(int(f.Fd()), &st)
		if err == nil {
			err = f.Close()
		}
		temps[i] = nil
		if err != nil {
			_ = f.Close()                         // may be closed already: the error that matters is err
			_ = unix.Unlinkat(tmpfd, f.Name(), 0) // not renamed: nothing of it is kept
			remove(i + 1)
			return out, fmt.Errorf("write %s/%s: %w", s, files[i].Name, err)
		}
		// Nothing in a stage is ever replaced (writeFrom).
		stored, err := moveUniqueAs(tmpfd, f.Name(), dirfd, files[i].Name)
		if err != nil {
			_ = unix.Unlinkat(tmpfd, f.Name(), 0) // the error that matters is the move's
			remove(i + 1)
			return out, fmt.Errorf("write %s/%s: %w", s, files[i].Name, err)
		}
		out = append(out, StoredCopy{Name: stored, Ino: st.Ino})
	}
	return out, nil
}

// StoredCopy is a file of a stage found by Copies.
type StoredCopy struct {
	Name string
	Ino  uint64
}

// Copies lists the regular files of stage s of size bytes whose SHA-256
// is sum, under name or one of the names a collision gives it
// (name~2...), up to the first of those names that is free: where
// WriteFile may have put that content under name before a crash. A file
// is read only when its size is size, and then streamed: a dead letter
// may be as large as the batch file it came from.
func (d *Dir) Copies(s Stage, name string, size int64, sum [sha256.Size]byte) ([]StoredCopy, error) {
	var out []StoredCopy
	for n := 1; n < maxSuffixTries; n++ {
		cand := name
		if n > 1 {
			cand = suffixed(name, n)
		}
		var st unix.Stat_t
		err := unix.Fstatat(d.fd(s), cand, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("stat %s/%s: %w", s, cand, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != size {
			continue
		}
		got, err := d.sum(s, cand)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNotRegular) {
			continue // gone or replaced since the stat
		}
		if err != nil {
			return nil, fmt.Errorf("read %s/%s: %w", s, cand, err)
		}
		if got == sum {
			out = append(out, StoredCopy{Name: cand, Ino: st.Ino})
		}
	}
	return out, nil
}

// sum returns the SHA-256 of the regular file name of stage s, read as
// it streams by.
func (d *Dir) sum(s Stage, name string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	fd, err := unix.Openat(d.fd(s), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return sum, ErrNotRegular
	}
	if err != nil {
		return sum, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close() // read-only: a close error loses nothing
	if fi, err := f.Stat(); err != nil {
		return sum, err
	} else if !fi.Mode().IsRegular() {
		return sum, ErrNotRegular
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return sum, err
	}
	h.Sum(sum[:0])
	return sum, nil
}

// Announce creates name in stage s as an empty file if nothing has that
// name there, and reports whether it did: a done-file given back to a
// batch file that recovery put back in inbox/. An empty file has nothing
// to be torn, so it is created in place, never replacing anything (a
// symlink of that name is left as it is). The caller syncs s.
func (d *Dir) Announce(s Stage, name string) (bool, error) {
	fd, err := unix.Openat(d.fd(s), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if errors.Is(err, unix.EEXIST) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create %s/%s: %w", s, name, err)
	}
	if err := unix.Close(fd); err != nil {
		return true, fmt.Errorf("create %s/%s: close: %w", s, name, err)
	}
	return true, nil
}

// OpenEntry opens the file of entry e of stage s for reading in place,
// without claiming it: for reports that read a batch file's records (spool
// schema). A symlink or a file that is not regular is ErrNotRegular; the
// file may be consumed meanwhile, which the caller takes as gone
// (fs.ErrNotExist).
func (d *Dir) OpenEntry(s Stage, e Entry) (*os.File, error) {
	if !e.Regular() {
		return nil, ErrNotRegular
	}
	fd, err := unix.Openat(d.fd(s), e.Name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, ErrNotRegular
		}
		return nil, fmt.Errorf("open %s/%s: %w", s, e.Name, err)
	}
	f := os.NewFile(uintptr(fd), e.Name)
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		_ = f.Close() // refused: only the refusal matters
		if err != nil {
			return nil, fmt.Errorf("open %s/%s: %w", s, e.Name, err)
		}
		return nil, ErrNotRegular
	}
	return f, nil
}
