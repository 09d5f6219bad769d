package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// syscallCounter counts the system calls the whole process makes, with the
// kernel's raw_syscalls:sys_enter tracepoint (what `perf stat -e
// raw_syscalls:sys_enter` counts), without slowing them as strace does. A
// perf counter counts one thread and, with inherit, the threads cloned from
// it after it opened: so there is one counter per thread that exists when
// it opens, and every later thread of the Go runtime is some counter's
// child. A thread started between the listing and its parent's counter
// would be missed, and so would every thread it starts: a young process
// starts threads as its first goroutines block, and a floor that ran on
// such a thread was seen making 0.1 calls a message for its 6. So the
// threads are listed again once every counter is open, and the counters
// opened anew until no thread appeared meanwhile.
type syscallCounter struct {
	fds []int
}

// tracefsRoots are where the tracepoints' ids may be read.
var tracefsRoots = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// openSyscallCounter opens the counters, or says in one line why it cannot
// (no tracefs mounted, no permission to count: perf_event_paranoid, or a
// container without perf events). The bench then reports no count rather
// than a wrong one.
func openSyscallCounter() (*syscallCounter, error) {
	id, err := tracepointID("raw_syscalls/sys_enter")
	if err != nil {
		return nil, err
	}
	const attempts = 20
	for range attempts {
		before, err := listThreads()
		if err != nil {
			return nil, err
		}
		c, err := openCounters(id, before)
		if err != nil {
			return nil, err
		}
		after, err := listThreads()
		if err != nil {
			c.Close()
			return nil, err
		}
		if !appeared(before, after) {
			return c, nil
		}
		c.Close() // a thread started meanwhile may have no counter
	}
	return nil, fmt.Errorf("count system calls: threads kept starting in %d attempts to open the counters", attempts)
}

// openCounters opens an inherited counter of tracepoint id on each of
// tids.
func openCounters(id uint64, tids []int) (*syscallCounter, error) {
	c := &syscallCounter{}
	for _, tid := range tids {
		attr := unix.PerfEventAttr{
			Type:   unix.PERF_TYPE_TRACEPOINT,
			Config: id,
			Bits:   unix.PerfBitInherit,
		}
		attr.Size = uint32(unsafe.Sizeof(attr))
		fd, err := unix.PerfEventOpen(&attr, tid, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if errors.Is(err, unix.ESRCH) {
			continue // the thread ended since the listing
		}
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("count system calls: perf_event_open: %w (as root, or with perf_event_paranoid at most 1)", err)
		}
		c.fds = append(c.fds, fd)
	}
	if len(c.fds) == 0 {
		return nil, errors.New("count system calls: no thread to count")
	}
	return c, nil
}

// listThreads lists the process's threads.
func listThreads() ([]int, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("count system calls: %w", err)
	}
	var tids []int
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// appeared reports whether after holds a thread that before does not.
func appeared(before, after []int) bool {
	for _, tid := range after {
		if !slices.Contains(before, tid) {
			return true
		}
	}
	return false
}

// tracepointID reads a tracepoint's id from tracefs.
func tracepointID(name string) (uint64, error) {
	var firstErr error
	for _, root := range tracefsRoots {
		b, err := os.ReadFile(root + "/events/" + name + "/id")
		if err == nil {
			return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return 0, fmt.Errorf("count system calls: tracepoint %s: %w (mount tracefs: mount -t tracefs nodev /sys/kernel/tracing)", name, firstErr)
}

// Count is the process's system calls since the counters opened: each
// counter's value includes its inherited children's, live or ended.
func (c *syscallCounter) Count() (uint64, error) {
	var total uint64
	var buf [8]byte
	for _, fd := range c.fds {
		n, err := unix.Read(fd, buf[:])
		if err != nil {
			return 0, fmt.Errorf("count system calls: read: %w", err)
		}
		if n != len(buf) {
			return 0, fmt.Errorf("count system calls: read %d bytes of 8", n)
		}
		total += binary.NativeEndian.Uint64(buf[:])
	}
	return total, nil
}

// Close closes the counters.
func (c *syscallCounter) Close() {
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	c.fds = nil
}
