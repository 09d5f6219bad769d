package metrics

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spoolq/spool/queue"
)

// DefaultReadyTimeout bounds one readiness check: a ledger that does not
// answer within it is not ready.
const DefaultReadyTimeout = 2 * time.Second

// Stages are the stages of a queue that readiness checks.
type Stages interface {
	// CheckStages fails when a stage's path no longer names the
	// directory in use (queue.Dir.CheckStages).
	CheckStages() error
	// StagePath is the path of a stage.
	StagePath(s queue.Stage) string
}

// Ready is what /readyz checks: the ledger answers, and every stage of the
// queue is a directory this process can create files in.
type Ready struct {
	// Ledger is the ledger's database: a read of its processed table must
	// answer.
	Ledger *sql.DB
	// Dir is the queue whose stages must be writable: a *queue.Dir, or a
	// *queue.Follow.
	Dir Stages
	// Timeout bounds the whole check. Zero: DefaultReadyTimeout.
	Timeout time.Duration
	// Paused, when set, says whether an operator paused the queue (spool
	// pause), and by whom and why. A paused queue is still ready: its
	// consumers are healthy and wait on purpose, and a readiness that
	// failed would stall the rolling deploy a pause is often for; /readyz
	// answers 200 and says so in its body.
	Paused func(ctx context.Context) (why string, paused bool)
}

// Check returns nil when the queue can be consumed now, or what stands in
// the way. It runs the checks in a goroutine of its own, so that a
// filesystem that hangs (a dead NFS server) makes the check fail at its
// timeout instead of hanging the caller.
func (r Ready) Check(ctx context.Context) error {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.check(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("readiness: no answer within %v", timeout)
	}
}

func (r Ready) check(ctx context.Context) error {
	if r.Ledger != nil {
		// A read of the ledger's own table, not a bare ping: SQLite's ping
		// never touches the file, and a PostgreSQL ping may be answered
		// by a pooled connection whose role can no longer log in anew.
		var one int
		err := r.Ledger.QueryRowContext(ctx, "SELECT 1 FROM processed LIMIT 1").Scan(&one)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("ledger: %w", err)
		}
	}
	if r.Dir != nil {
		if err := r.Dir.CheckStages(); err != nil {
			return err
		}
		for _, s := range queue.Stages {
			if err := writable(r.Dir.StagePath(s)); err != nil {
				return fmt.Errorf("stage %s: %w", s, err)
			}
		}
	}
	return nil
}

// writable creates a file in dir and takes it away again: the one test
// that answers for root (whom permission bits do not stop), a read-only
// mount, an immutable directory, a full inode table, and a stage replaced
// by something else. It uses an unnamed O_TMPFILE inode, which a crash
// cannot leave behind; where the filesystem lacks O_TMPFILE (NFS, some
// FUSE), a named temp file that the queue ignores and its stale-temp
// sweep removes (queue.TempPrefix).
func writable(dir string) error {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return closeErr(fd)
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("create a file in %s: %w", dir, err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	name := filepath.Join(dir, queue.TempPrefix+"ready-"+hex.EncodeToString(b[:]))
	fd, err = unix.Open(name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create a file in %s: %w", dir, err)
	}
	cerr := closeErr(fd)
	if err := unix.Unlink(name); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return cerr
}

func closeErr(fd int) error {
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("close probe file: %w", err)
	}
	return nil
}

// Mux serves the metrics at /metrics, liveness at /healthz (200 while the
// process serves HTTP at all) and readiness at /readyz (200 when ready's
// Check passes, with "ready, paused: ..." while the queue is paused, else
// 503 with the reason on one line).
func Mux(m *Metrics, ready Ready) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := ready.Check(req.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:", strings.ReplaceAll(err.Error(), "\n", " "))
			return
		}
		if ready.Paused != nil {
			if why, ok := ready.Paused(req.Context()); ok {
				fmt.Fprintln(w, "ready, paused:", strings.ReplaceAll(why, "\n", " "))
				return
			}
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}
