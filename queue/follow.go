//go:build linux

package queue

import (
	"errors"
	"path/filepath"
	"sync"
)

// Follow is a read-only view of a queue that follows its paths, for a
// process that only watches it (spool serve): when a stage's path names
// another directory than the one open (inbox/ moved aside or removed, and
// a new one made), the next call reopens the queue at its path, so that
// the counts are those of the directories the path names now, not of the
// old ones the descriptors still hold. A consumer must not use it: it
// stops instead (Dir.CheckStages), since its claims live in the old
// directories. Follow is safe for concurrent use.
type Follow struct {
	path     string
	reopened func()

	mu  sync.Mutex
	cur *followed
}

// followed is one open Dir of a Follow and the calls using it.
type followed struct {
	d       *Dir
	own     bool // opened by Follow, which closes it
	users   int
	retired bool
}

// NewFollow follows the queue d was opened at, starting with d, which
// stays the caller's to close (after Follow's Close). reopened, when not
// nil, is called after each reopening.
func NewFollow(d *Dir, reopened func()) *Follow {
	return &Follow{path: d.Path(), reopened: reopened, cur: &followed{d: d}}
}

func (f *Follow) acquire() *followed {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cur.users++
	return f.cur
}

func (f *Follow) release(r *followed) error {
	f.mu.Lock()
	r.users--
	closeIt := r.retired && r.users == 0 && r.own
	f.mu.Unlock()
	if closeIt {
		return r.d.Close()
	}
	return nil
}

// follow reopens the queue when a stage's path names another directory
// than r's. It returns r's CheckStages error when the queue cannot be
// opened again (a stage gone, not yet made anew), nil when r is current
// or was replaced.
func (f *Follow) follow(r *followed) error {
	err := r.d.CheckStages()
	if !errors.Is(err, ErrStageReplaced) {
		return err
	}
	nd, oerr := Open(f.path)
	if oerr != nil {
		return err
	}
	f.mu.Lock()
	if f.cur != r || r.retired {
		// Another call reopened it meanwhile.
		f.mu.Unlock()
		return nd.Close()
	}
	old := f.cur
	old.retired = true
	f.cur = &followed{d: nd, own: true}
	closeOld := old.users == 0 && old.own
	f.mu.Unlock()
	if f.reopened != nil {
		f.reopened()
	}
	if closeOld {
		return old.d.Close()
	}
	return nil
}

// current is the Dir to use now, reopened first when a stage was
// replaced; the caller releases it, even with an error.
func (f *Follow) current() (*followed, error) {
	r := f.acquire()
	err := f.follow(r)
	rerr := f.release(r)
	return f.acquire(), errors.Join(err, rerr)
}

// Stats is Dir.Stats of the directory the stage's path names now.
func (f *Follow) Stats(s Stage, ages bool) (StageStats, error) {
	r, err := f.current()
	defer func() { _ = f.release(r) }()
	if err != nil {
		return StageStats{}, err
	}
	return r.d.Stats(s, ages)
}

// CheckStages is nil when every stage's path names a directory of the
// queue, reopened if need be; else Dir.CheckStages's error (a stage gone,
// or a stage not a directory).
func (f *Follow) CheckStages() error {
	r, err := f.current()
	if rerr := f.release(r); err == nil {
		err = rerr
	}
	return err
}

// StagePath is Dir.StagePath.
func (f *Follow) StagePath(s Stage) string { return filepath.Join(f.path, string(s)) }

// Close closes the directories Follow opened itself once no call uses
// them; the Dir given to NewFollow stays open.
func (f *Follow) Close() error {
	f.mu.Lock()
	r := f.cur
	r.retired = true
	closeIt := r.users == 0 && r.own
	f.mu.Unlock()
	if closeIt {
		return r.d.Close()
	}
	return nil
}
