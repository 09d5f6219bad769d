package sqlite

import (
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// turnFile is the ledger.Turn of an SQLite ledger: an flock on the file
// PATH-turn beside the database, taken by the write transactions of every
// consumer process on the host, so that they queue in the kernel instead
// of polling in SQLite's busy handler (whose sleeps grow to 100 ms: with
// four processes committing short transactions back to back, a writer
// that lost the race a few times slept while the lock was free).
//
// It is an optimisation only: SQLite's own locks keep writers apart, and
// the turn file is never one of the files SQLite locks (closing another
// descriptor of those would drop the process's POSIX locks on them). So
// any failure gives up the turn and leaves the writer to SQLite: a file
// that cannot be opened or created (a read-only directory), a lock that cannot be
// taken, or a holder that keeps it longer than the busy timeout (a stopped
// process), which would otherwise hang the writer where SQLite would have
// failed it. The file is created at the first write, so that commands
// that only read a ledger leave no file behind, and is never removed: a
// lock file removed while another process waits on it would give two
// processes the turn at once.
type turnFile struct {
	path string
	mode os.FileMode

	mu     sync.Mutex // guards f and broken
	f      *os.File
	broken bool
}

// Take takes the turn; see ledger.Turn. The process's own turn is held
// (the ledger takes it first), so one goroutine at a time gets here.
func (t *turnFile) Take() func() {
	f := t.file()
	if f == nil {
		return func() {}
	}
	unlock := func() { _ = flock(f, unix.LOCK_UN) }
	err := flock(f, unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		return unlock
	}
	if !errors.Is(err, unix.EWOULDBLOCK) {
		return func() {}
	}
	got := make(chan error, 1)
	go func() {
		for {
			err := flock(f, unix.LOCK_EX)
			if !errors.Is(err, unix.EINTR) {
				got <- err
				return
			}
		}
	}()
	timer := time.NewTimer(busyTimeout * time.Millisecond)
	defer timer.Stop()
	select {
	case err := <-got:
		if err != nil {
			return func() {}
		}
		return unlock
	case <-timer.C:
		// Given up: the lock, when it comes, is let go at once.
		go func() {
			if <-got == nil {
				unlock()
			}
		}()
		return func() {}
	}
}

// flock applies how to f. Through the descriptor's reference count, so
// that a Close meanwhile cannot free the number for another file while a
// lock waits on it (a given-up Take's goroutine).
func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = unix.Flock(int(fd), how) }); err != nil {
		return err
	}
	return ferr
}

// file opens the turn file the first time, with the database file's mode.
func (t *turnFile) file() *os.File {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f == nil && !t.broken {
		// Read-only: an flock needs no more, so a consumer that may only
		// read the turn file another user created still takes turns.
		f, err := os.OpenFile(t.path, os.O_RDONLY|os.O_CREATE|unix.O_CLOEXEC, t.mode)
		if err != nil {
			t.broken = true
			return nil
		}
		t.f = f
	}
	return t.f
}

// Close closes the turn file, releasing the lock if it is held.
func (t *turnFile) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f == nil {
		return nil
	}
	err := t.f.Close()
	t.f, t.broken = nil, true
	return err
}
