//go:build linux

package queue

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// Arrivals rings a doorbell when a message name appears in inbox/ (a file
// renamed or created there), from inotify through fsnotify. It is a
// doorbell, not a list: it never says which file arrived, and it may ring
// for a file another consumer has claimed already. The truth is always a
// scan of inbox/; a consumer scans when the bell rings and, since
// notifications can be lost, also now and then without it. When the
// kernel's queue of notifications overflows (fs.inotify.max_queued_events),
// Overflowed reports it and the bell rings, so that the consumer scans at
// once. Arrivals is safe for concurrent use.
type Arrivals struct {
	w        *fsnotify.Watcher
	bell     chan struct{}
	overflow atomic.Int64          // overflows not yet reported by Overflowed
	failed   atomic.Pointer[error] // the first error of the watch other than an overflow
	wg       sync.WaitGroup
	is       func(name string) bool // which arrivals ring the bell
}

// WatchInbox starts watching inbox/ for arrivals. It fails when inotify
// cannot be had (no instances or watches left, fs.inotify.max_user_*);
// a caller can then poll instead.
func (d *Dir) WatchInbox() (*Arrivals, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", d.StagePath(Inbox), err)
	}
	if err := w.Add(d.StagePath(Inbox)); err != nil {
		w.Close()
		return nil, fmt.Errorf("watch %s: %w", d.StagePath(Inbox), err)
	}
	a := &Arrivals{w: w, bell: make(chan struct{}, 1), is: IsMessageName}
	if d.names != nil {
		// A batch queue: a data file, or the done-file that makes one
		// ready, whatever its name; a rename into inbox/ is a Create.
		a.is = func(name string) bool { return name != "" && name[0] != '.' }
	}
	a.wg.Add(1)
	go a.listen()
	return a, nil
}

// listen turns fsnotify's events into rings of the bell. Only arrivals of
// message names ring it: a producer's temp file, its writes, and the
// claims that rename files out of inbox/ do not, or a consumer would scan
// once more for each of its own claims.
func (a *Arrivals) listen() {
	defer a.wg.Done()
	events, errs := a.w.Events, a.w.Errors
	for events != nil || errs != nil {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Has(fsnotify.Create) && a.is(filepath.Base(ev.Name)) {
				a.ring()
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				a.overflow.Add(1)
			} else {
				a.failed.CompareAndSwap(nil, &err)
			}
			a.ring()
		}
	}
}

func (a *Arrivals) ring() {
	select {
	case a.bell <- struct{}{}:
	default: // rung already: one scan will see every arrival so far
	}
}

// Bell receives a value after one or more arrivals (or an overflow, or a
// failure of the watch) since it was last received from.
func (a *Arrivals) Bell() <-chan struct{} { return a.bell }

// Overflowed returns how many times the kernel dropped notifications since
// it was last called: arrivals may then have rung no bell.
func (a *Arrivals) Overflowed() int { return int(a.overflow.Swap(0)) }

// Err returns the first failure of the watch other than an overflow (for
// example a read error of the inotify descriptor), or nil. After one, the
// bell can no longer be trusted.
func (a *Arrivals) Err() error {
	if err := a.failed.Load(); err != nil {
		return *err
	}
	return nil
}

// Close stops the watch and waits for its goroutine.
func (a *Arrivals) Close() error {
	err := a.w.Close()
	a.wg.Wait()
	if err != nil {
		return fmt.Errorf("close watch: %w", err)
	}
	return nil
}

// remoteFS names the filesystems (statfs f_type) on which inotify sees
// only this host's changes, or none: files that other hosts write (NFS,
// SMB, CephFS, ...) or that a FUSE daemon serves from elsewhere ring no
// bell, so a consumer there must poll.
var remoteFS = map[int64]string{
	0x6969:     "nfs",
	0x517b:     "smb",
	0xff534d42: "cifs",
	0xfe534d42: "smb2",
	0x65735546: "fuse",
	0x00c36400: "ceph",
	0x5346414f: "afs",
	0x6b414653: "afs", // kAFS
	0x01021997: "9p",
	0x73757245: "coda",
	0x0bd00bd0: "lustre",
	0x47504653: "gpfs",
	0x7461636f: "ocfs2",
	0x01161970: "gfs2",
	0x564c:     "ncp",
	0x013111a8: "ibrix",
	0xaad7aaea: "panfs",
	0x19830326: "fhgfs", // BeeGFS
}

// RemoteFS reports whether inbox/ is on a network or FUSE filesystem
// (by statfs's f_type), where notifications miss other hosts' writes, and
// names the filesystem.
func (d *Dir) RemoteFS() (string, bool, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(d.fd(Inbox), &st); err != nil {
		return "", false, fmt.Errorf("statfs %s: %w", d.StagePath(Inbox), err)
	}
	name, ok := remoteFS[int64(st.Type)&0xffffffff]
	if !ok {
		return fmt.Sprintf("0x%x", st.Type), false, nil
	}
	return name, true, nil
}

// Changed returns when a file of a stage last changed: the later of its
// modification and status-change times (ctime). A writer can set a file's
// mtime to anything (cp -p, touch -d, rsync -t, unzip) but not its ctime,
// which the kernel sets to now at every write, truncation, chmod, utime
// and rename; so a file whose Changed is old has been left alone for that
// long, whatever mtime it carries. It wraps ENOENT when the file is gone.
func (d *Dir) Changed(s Stage, name string) (time.Time, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd(s), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return time.Time{}, fmt.Errorf("stat %s/%s: %w", s, name, err)
	}
	m, c := time.Unix(st.Mtim.Unix()), time.Unix(st.Ctim.Unix())
	if m.After(c) && !m.After(time.Now()) {
		return m, nil
	}
	// An mtime in the future (a producer's clock ahead, a touch -d) says
	// nothing of when the file last changed; its ctime does.
	return c, nil
}
