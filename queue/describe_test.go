package queue

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

func TestFileType(t *testing.T) {
	for _, tt := range []struct {
		mode uint32
		want string
	}{
		{unix.S_IFREG | 0o644, "regular file"},
		{unix.S_IFLNK | 0o777, "symlink"},
		{unix.S_IFIFO, "FIFO"},
		{unix.S_IFDIR | 0o755, "directory"},
		{unix.S_IFSOCK, "socket"},
		{unix.S_IFCHR, "character device"},
		{unix.S_IFBLK, "block device"},
		{0, "special file"},
	} {
		if got := FileType(tt.mode); got != tt.want {
			t.Errorf("FileType(%#o) = %q, want %q", tt.mode, got, tt.want)
		}
	}
}

func TestCause(t *testing.T) {
	if got := Cause(fmt.Errorf("read a.json: %w", unix.EACCES)); got != unix.EACCES {
		t.Errorf("Cause of a wrapped EACCES = %v, want the errno", got)
	}
	other := errors.New("short read")
	if got := Cause(other); got != other {
		t.Errorf("Cause of an error without errno = %v, want it unchanged", got)
	}
}
