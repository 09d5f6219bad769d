package main

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/hold"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/task"
)

func TestExitCode(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("context: %w", err) }
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{cmdline.ErrHelp, 0},
		{errCheckFailed, 1},
		{wrap(queue.ErrNotInError), 1},
		{&inputError{path: "x.json", err: fs.ErrNotExist}, 1},
		{&cmdline.UsageError{Msg: "bad"}, 2},
		{&queueopen.ConfigError{Path: "spool.conf", Err: errors.New("bad")}, 2},
		{wrap(&queueopen.ContractError{Queue: "q"}), 2},
		{wrap(queue.ErrNotQueue), 2},
		{wrap(queue.ErrCrossDevice), 2},
		{wrap(spool.ErrBadContract), 2},
		{wrap(queue.ErrPathLike), 2},
		{wrap(queue.ErrNotMessageName), 2},
		{wrap(&sqlite.FileError{Path: "/tmp", Err: sqlite.ErrIsDirectory}), 2},
		{nameDBFlag("/x.db", &sqlite.FileError{Path: "/x.db", Err: sqlite.ErrNotDatabase}), 2},
		{&sqlite.FileError{Path: "q/ledger.db-shm", Err: sqlite.ErrReadOnly}, 2},
		// A file vanishing under a running command is a failure of the run,
		// not a check's finding: only input files named by the user are 1.
		{wrap(fs.ErrNotExist), 3},
		{errors.New("disk on fire"), 3},
		{wrap(spool.ErrShutdownTimeout), 4},
		{wrap(task.ErrDigest), 1},
		{wrap(task.ErrOwnRequest), 1},
		{&task.RequestError{Field: "to", Err: errors.New("to /x: no such file or directory")}, 2},
		{wrap(hold.ErrBadRequest), 2},
		{wrap(hold.ErrForbidden), 1},
	} {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}
