//go:build linux

package queue

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadFailure: an unreadable message's detail names the errno, which
// is what tells an operator that a chmod fixes it.
func TestReadFailure(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("read x.json: %w", unix.EACCES), "permission denied (EACCES)"},
		{fmt.Errorf("read x.json: %w", unix.EIO), "input/output error (EIO)"},
		{errors.New("something else"), "something else"},
	} {
		if got := ReadFailure(tt.err); got != tt.want {
			t.Errorf("ReadFailure(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
