package metrics

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"syscall"
)

// The host's resources a consumer needs besides the queue (spool check
// reports them): free space and inodes on the queue's filesystem, and the
// user's inotify limits for a watching consumer.

// The least free space and inodes on the queue's filesystem that spool
// check takes for enough: below them a consumer is a burst away from
// failing to move a file or to write its ledger's journal.
const (
	minFreeBytes  = 64 << 20
	minFreeInodes = 1024
)

// Space is the free space of the filesystem holding a path, as an
// unprivileged user may use it; inodes is 0 for a filesystem that does
// not count them (btrfs reports 0 in all).
type Space struct {
	bytes, inodes uint64
	countsInodes  bool
}

// FreeSpace is the free space of the filesystem holding path.
func FreeSpace(path string) (Space, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return Space{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	return Space{bytes: st.Bavail * uint64(st.Bsize), inodes: st.Ffree, countsInodes: st.Files > 0}, nil
}

// Problem says what is short for a queue at path, "" when nothing is:
// less than 64 MiB, or (on a filesystem that counts them) fewer than 1024
// inodes.
func (s Space) Problem(path string) string {
	switch {
	case s.bytes < minFreeBytes:
		return fmt.Sprintf("%s: only %s free on its filesystem", path, iec(s.bytes))
	case s.countsInodes && s.inodes < minFreeInodes:
		return fmt.Sprintf("%s: only %d inodes free on its filesystem: each message takes one", path, s.inodes)
	}
	return ""
}

// String says the free bytes (with a binary unit) and inodes.
func (s Space) String() string {
	if !s.countsInodes {
		return iec(s.bytes) + " free"
	}
	return fmt.Sprintf("%s and %d inodes free", iec(s.bytes), s.inodes)
}

// iec writes a byte count with a binary unit: 1.5 GiB.
func iec(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// inotifyProc is where the kernel's per-user inotify limits are.
const inotifyProc = "/proc/sys/fs/inotify"

// InotifyUse is how much of the per-user inotify limits this user's
// processes hold: consume --watch takes one instance and one watch (on
// inbox/) more, and falls back to polling when it cannot.
type InotifyUse struct {
	instances, watches       int
	maxInstances, maxWatches int
}

// InotifyUsage counts the inotify instances and watches of the processes
// of uid, from /proc/PID/fd and fdinfo: the limits are per user, shared by
// every program the user runs (an editor, a file manager, other
// consumers). Processes of other users, whose fd directories this user
// may not read, do not count against its limits anyway.
func InotifyUsage(uid int) (InotifyUse, error) {
	var u InotifyUse
	for _, l := range []struct {
		name string
		dst  *int
	}{{"max_user_instances", &u.maxInstances}, {"max_user_watches", &u.maxWatches}} {
		b, err := os.ReadFile(filepath.Join(inotifyProc, l.name))
		if err != nil {
			return u, fmt.Errorf("inotify limits: %w", err)
		}
		if *l.dst, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return u, fmt.Errorf("inotify limits: %s: %w", l.name, err)
		}
	}
	pids, err := os.ReadDir("/proc")
	if err != nil {
		return u, fmt.Errorf("inotify use: %w", err)
	}
	for _, p := range pids {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", p.Name()), &st) != nil || int(st.Uid) != uid {
			continue
		}
		fds, err := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		if err != nil {
			continue // gone, or not ours to read
		}
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); err != nil || link != "anon_inode:inotify" {
				continue
			}
			u.instances++
			u.watches += countWatches(filepath.Join("/proc", p.Name(), "fdinfo", fd.Name()))
		}
	}
	return u, nil
}

// countWatches counts the "inotify wd:" lines of an inotify descriptor's
// fdinfo, one per watch.
func countWatches(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close() // read-only
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "inotify wd:") {
			n++
		}
	}
	return n
}

// Problem says why consume --watch could not have its notifications
// (the user holds the limit of instances or of watches already), with
// the sysctl that raises it; "" when it can.
func (u InotifyUse) Problem() string {
	switch {
	case u.instances >= u.maxInstances:
		return fmt.Sprintf("--watch: this user's processes hold %d inotify instances, the limit (%s/max_user_instances): consume would poll inbox/ instead. Try: sysctl fs.inotify.max_user_instances=%d", u.instances, inotifyProc, 2*u.maxInstances)
	case u.watches >= u.maxWatches:
		return fmt.Sprintf("--watch: this user's processes hold %d inotify watches, the limit (%s/max_user_watches): consume would poll inbox/ instead. Try: sysctl fs.inotify.max_user_watches=%d", u.watches, inotifyProc, 2*u.maxWatches)
	}
	return ""
}

// String says the instances and watches in use against their limits.
func (u InotifyUse) String() string {
	return fmt.Sprintf("%d of %d instances and %d of %d watches in use by this user (--watch takes 1 of each)",
		u.instances, u.maxInstances, u.watches, u.maxWatches)
}
