package queue

import (
	"errors"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noWaitUnsupported is set once a read with RWF_NOWAIT was refused (a
// kernel before 4.14, or a filesystem without it): reads then always wait,
// and Prefetch reads ahead without asking first.
var noWaitUnsupported atomic.Bool

// readNoWait reads into p from fd's current offset without waiting for the
// disk: EAGAIN when the data is not in the page cache. Where the kernel or
// the filesystem cannot say, it reads as read(2) does, and remembers.
func readNoWait(fd int, p []byte) (int, error) {
	n, err := unix.Preadv2(fd, [][]byte{p}, -1, unix.RWF_NOWAIT)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		noWaitUnsupported.Store(true)
		return unix.Read(fd, p)
	}
	return n, err
}

// Prefetch asks the kernel to start reading, in the background, the data
// of the regular files among names in a stage whose data is not in the
// page cache, and returns how many it found so: an estimate, since a file
// whose read the check itself started (Linux starts one) and the disk
// served at once counts as cached. It waits for no disk read:
// the reads are queued together, so the disk serves many at once instead of
// one per waiting reader, and the claims that follow find the data cached.
//
// Why it matters: a backlog that waited long enough for the page cache to
// drop it (overnight, or minutes on a machine that reclaims idle memory
// proactively) is otherwise read one file per worker at a time, each
// waiting for the disk. Prefetch is a hint: a name that is gone, is not a
// regular file, is empty or is over limit bytes is skipped, and errors are
// ignored. It never opens anything but a regular file (it checks with lstat
// first, and opens without following symlinks or blocking), and it reads
// at most one byte, to ask whether the data is cached.
func (d *Dir) Prefetch(s Stage, names []string, limit int64) (cold int) {
	dirfd := d.fd(s)
	var one [1]byte
	for _, name := range names {
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil ||
			st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size == 0 || st.Size > limit {
			continue
		}
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		cached := false
		if !noWaitUnsupported.Load() {
			_, err := readNoWait(fd, one[:])
			cached = err == nil
		}
		if !cached {
			cold++
			_ = unix.Fadvise(fd, 0, st.Size, unix.FADV_WILLNEED)
		}
		unix.Close(fd)
	}
	return cold
}
