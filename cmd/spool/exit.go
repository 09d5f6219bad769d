package main

import (
	"errors"
	"fmt"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/hold"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/relay"
	"github.com/spoolq/spool/report"
	"github.com/spoolq/spool/task"
)

// Exit statuses: the contract scripts rely on (docs/DESIGN.md, "Exit
// status").
const (
	exitOK = 0
	// exitProblem: a check found a problem (lag over the threshold, order
	// problems, an input file that does not exist).
	exitProblem = 1
	// exitUsage: bad usage or configuration.
	exitUsage = 2
	// exitFailure: the command could not do its work.
	exitFailure = 3
	// exitShutdownTimeout: consume stopped at a signal, but had to cancel
	// calls still running at --shutdown-timeout (held in processing/ for
	// the next run, as after a kill); distinct from exitFailure, because
	// nothing failed.
	exitShutdownTimeout = 4
)

// errCheckFailed is returned by a check whose output already shows what it
// found (lag over the threshold, order problems, skipped sources): exit 1
// with nothing more on stderr.
var errCheckFailed = cmdline.ErrReported

// inputError is an input file named on the command line (a file to
// enqueue, init's --from directory) that does not exist: "file not found"
// is a check's finding, exit 1.
type inputError struct {
	path string
	err  error
}

func (e *inputError) Error() string { return fmt.Sprintf("%s: %v", e.path, e.err) }
func (e *inputError) Unwrap() error { return e.err }

// isRefusal reports whether err is a refusal of package task (an
// approval of one's own request or of another set than the task's, a
// role too low, a stale set, a task in another state or unknown) or of
// package hold (a role too low). Nothing
// was changed: exit 1.
func isRefusal(err error) bool {
	for _, r := range []error{task.ErrOwnRequest, task.ErrForbidden, task.ErrStale, task.ErrState, task.ErrNotFound, task.ErrDigest, hold.ErrForbidden} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// exitCode is the one place that maps errors to exit statuses.
func exitCode(err error) int {
	var (
		usage   *cmdline.UsageError
		config  *queueopen.ConfigError
		input   *inputError
		fileErr *sqlite.FileError // a directory, a missing one, not a database, read-only
	)
	switch {
	case err == nil, errors.Is(err, cmdline.ErrHelp):
		return exitOK
	case errors.Is(err, sqlite.ErrDiskFull):
		// A *sqlite.FileError, but the machine's state, not the usage's.
		return exitFailure
	case errors.As(err, &usage), errors.As(err, &config), errors.As(err, &fileErr),
		errors.Is(err, queue.ErrNotQueue), errors.Is(err, queue.ErrCrossDevice),
		errors.Is(err, spool.ErrBadContract), errors.Is(err, queue.ErrPathLike),
		errors.Is(err, queue.ErrNotMessageName), errors.Is(err, queue.ErrNotIncluded), errors.As(err, new(*queueopen.RefusalError)),
		errors.Is(err, ledger.ErrBadDSN), errors.Is(err, relay.ErrBadTarget),
		errors.As(err, new(*queueopen.ContractError)):
		return exitUsage
	case errors.Is(err, task.ErrBadRequest), errors.Is(err, hold.ErrBadRequest):
		return exitUsage
	case errors.Is(err, errCheckFailed), errors.Is(err, queue.ErrNotInError), errors.As(err, &input), isRefusal(err):
		return exitProblem
	case errors.Is(err, spool.ErrShutdownTimeout):
		return exitShutdownTimeout
	}
	return exitFailure
}

// oneLine keeps a message on one line, its control characters escaped
// (report.OneLine).
func oneLine(s string) string { return report.OneLine(s) }
