//go:build linux

package queue

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The two system calls every message makes with names (the renames of its
// claim and its finish, the open of its read), without the heap copy of
// each name that golang.org/x/sys/unix makes to add the terminating NUL:
// the name is copied into a buffer on the caller's stack instead. That was
// five of a drained message's allocations; each call is otherwise
// unix.Renameat2's and unix.Openat's own.

// cName is a name as the kernel reads it: NUL-terminated. A name of the
// queue is at most NAME_MAX (255) bytes; a longer one, or one holding a
// NUL, is left to unix's own conversion, which returns its error.
type cName [maxNameBytes + 1]byte

// ptr returns s as a C string in b, or ok false when it does not fit.
func (b *cName) ptr(s string) (p *byte, ok bool) {
	if len(s) > maxNameBytes {
		return nil, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return nil, false
		}
	}
	copy(b[:], s)
	b[len(s)] = 0
	return &b[0], true
}

// renameat2 is unix.Renameat2 without allocating.
func renameat2(olddir int, old string, newdir int, new string, flags uint) error {
	var ob, nb cName
	op, ok1 := ob.ptr(old)
	np, ok2 := nb.ptr(new)
	if !ok1 || !ok2 {
		return unix.Renameat2(olddir, old, newdir, new, flags)
	}
	_, _, e := unix.Syscall6(unix.SYS_RENAMEAT2, uintptr(olddir), uintptr(unsafe.Pointer(op)),
		uintptr(newdir), uintptr(unsafe.Pointer(np)), uintptr(flags), 0)
	return errno(e)
}

// openat is unix.Openat without allocating.
func openat(dirfd int, name string, flags int, mode uint32) (int, error) {
	var b cName
	p, ok := b.ptr(name)
	if !ok {
		return unix.Openat(dirfd, name, flags, mode)
	}
	fd, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)),
		uintptr(flags|unix.O_LARGEFILE), uintptr(mode), 0, 0)
	if e != 0 {
		return -1, errno(e)
	}
	return int(fd), nil
}

// errno is e as an error: nil for 0. An Errno compares with errors.Is
// against the unix constants as unix's own errors do.
func errno(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}
