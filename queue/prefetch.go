//go:build linux

package queue

import (
	"errors"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noWaitUnsupported is set once a read of a regular file with RWF_NOWAIT
// was refused (a kernel before 4.14, a filesystem without it, a seccomp
// filter): this process's reads then always wait, and count no cold
// reads. It is process-wide, as a consumer reads one queue. A refusal for
// another kind of file (a directory put in a claim's place: directories
// have no RWF_NOWAIT) or a failure of one file's read (EIO from a bad
// sector) does not set it: that says nothing of the next message, and
// counting would stop for the rest of the run.
var noWaitUnsupported atomic.Bool

// readNoWait reads into p from fd's current offset without waiting for the
// disk: EAGAIN when the data is not in the page cache. Where that cannot
// be asked, it reads as read(2) does, and remembers (noWaitUnsupported);
// after any other failure it reads as read(2) does this once, so the
// caller sees the error read(2) gives.
func readNoWait(fd int, p []byte) (int, error) {
	n, err := unix.Preadv2(fd, [][]byte{p}, -1, unix.RWF_NOWAIT)
	if err == nil || errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return n, err
	}
	if noWaitRefused(err) && regularFd(fd) {
		noWaitUnsupported.Store(true)
	}
	return unix.Read(fd, p)
}

// noWaitRefused reports whether err, from a read with RWF_NOWAIT, says the
// flag or the call is refused rather than that the read failed.
func noWaitRefused(err error) bool {
	for _, e := range []error{unix.EOPNOTSUPP, unix.ENOSYS, unix.EINVAL, unix.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// regularFd reports whether fd is open on a regular file. It costs an
// fstat, so it is asked only on the rare path of a refused read.
func regularFd(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}

// cachestatUnsupported is set once cachestat(2) failed (a kernel before
// 6.5): Prefetch then takes every file for cold.
var cachestatUnsupported atomic.Bool

// inPageCache reports whether all of fd's first size bytes are in the page
// cache, without reading anything in.
func inPageCache(fd int, size int64) bool {
	if cachestatUnsupported.Load() {
		return false
	}
	var cs unix.Cachestat_t
	r := unix.CachestatRange{Off: 0, Len: uint64(size)}
	if err := unix.Cachestat(uint(fd), &r, &cs, 0); err != nil {
		cachestatUnsupported.Store(true)
		return false
	}
	page := int64(os.Getpagesize())
	return int64(cs.Cache) >= (size+page-1)/page
}

// Prefetch asks the kernel to start reading, in the background, the data
// of the regular files among names in a stage that is not in the page
// cache, and returns how many it found so (where the kernel cannot say,
// before Linux 6.5, every file it hinted). It waits for no disk read: the
// reads are queued together, so the disk serves many at once instead of
// one per waiting reader, and the claims that follow find the data cached.
//
// Why it matters: a backlog that waited long enough for the page cache to
// drop it (overnight, or minutes on a machine that reclaims idle memory
// proactively) is otherwise read one file per worker at a time, each
// waiting for the disk.
//
// Prefetch is a hint and reads nothing itself (the message is read only
// once claimed). A name that is gone, is not a regular file, is empty or
// is over limit bytes is skipped, and errors are ignored. It opens only
// what lstat found to be a regular file, without following symlinks,
// blocking or taking a terminal, and checks that what it opened is that
// same file before anything else: a FIFO or device renamed over the name
// in between is opened, but then closed untouched.
func (d *Dir) Prefetch(s Stage, names []string, limit int64) (cold int) {
	dirfd := d.fd(s)
	for _, name := range names {
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil ||
			st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size == 0 || st.Size > limit {
			continue
		}
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		var opened unix.Stat_t
		if unix.Fstat(fd, &opened) == nil && opened.Ino == st.Ino && opened.Dev == st.Dev &&
			opened.Mode&unix.S_IFMT == unix.S_IFREG && !inPageCache(fd, st.Size) {
			cold++
			_ = unix.Fadvise(fd, 0, st.Size, unix.FADV_WILLNEED)
		}
		unix.Close(fd)
	}
	return cold
}
