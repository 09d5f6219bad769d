package queue

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// FileType names the file type held in mode (a Claim's or an Entry's Mode)
// for a person: "symlink", "FIFO", "directory", "socket", "character
// device", "block device" or "regular file"; "special file" for any other.
// A dead letter's detail says which kind of file was refused.
func FileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return "special file"
}

// ModeType is FileType of an fs.FileMode (os.Stat's), with the same
// names: every message that refuses a file for its type words it alike.
func ModeType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	}
	return "special file"
}

// Cause returns the system error (an errno, such as "permission denied")
// beneath an error of this package, or err itself when there is none. A
// dead letter's detail uses it so as not to repeat the file's name, which
// its record holds already.
func Cause(err error) error {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// OutOfResources reports whether err is the process or the system running
// out of what it takes to open or read a file, not a fault of the file:
// file descriptors (EMFILE, ENFILE: ulimit -n) or kernel memory (ENOMEM).
// A later try reads the file, so a consumer must not dead-letter it as
// unreadable, but stop.
func OutOfResources(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOMEM)
}

// ReadFailure describes why a file could not be read, for a dead letter's
// detail: the system's message and the errno's name, which is what an
// operator searches for ("permission denied (EACCES)").
func ReadFailure(err error) string {
	errno, ok := Cause(err).(unix.Errno)
	if !ok {
		return err.Error()
	}
	if name := unix.ErrnoName(errno); name != "" {
		return fmt.Sprintf("%v (%s)", errno, name)
	}
	return errno.Error()
}
