//go:build linux

// Package queue implements spool's directory protocol: the four stages of a
// queue directory, atomic claims into a per-consumer directory that a kernel
// lock guards, recovery of the claims of dead consumers, no-replace moves
// between stages, and the one atomic-write helper, which producers use to
// put messages into a stage and the CLI to write its -o files.
//
// It knows nothing of messages' content or of the ledger: the consumer in
// package spool decides what becomes of a claim; this package only moves
// files so that none is lost, duplicated or overwritten.
//
// Linux is the supported platform (renameat2, flock, dirfd-relative calls).
package queue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Stage is one of the four directories of a queue.
type Stage string

// The stages, in the order a message passes through them.
const (
	Inbox      Stage = "inbox"
	Processing Stage = "processing"
	Done       Stage = "done"
	Error      Stage = "error"
)

// Stages lists every stage a message passes through. Held, the stage of
// the messages an operator holds aside (held.go), is not among them: a
// queue made before it existed lacks it, and a queue is opened without
// it.
var Stages = []Stage{Inbox, Processing, Done, Error}

// ErrNotQueue is wrapped by Open when the directory lacks a stage.
var ErrNotQueue = errors.New("not a queue directory")

// ErrCrossDevice is wrapped by Open when the stages are not on one
// filesystem: rename between them would not be atomic, so a move could be
// half done after a crash.
var ErrCrossDevice = errors.New("stages are on different filesystems")

// ErrStageReplaced is wrapped by CheckStages when a stage's path no longer
// names the directory the Dir opened.
var ErrStageReplaced = errors.New("was replaced while the queue was open")

// Dir is an open queue directory. It holds a descriptor on each stage so that
// the hot path uses dirfd-relative system calls. Dir is safe for concurrent
// use.
type Dir struct {
	path string
	root int // the queue directory itself
	fds  map[Stage]int
	// held is the descriptor of held/ plus one, 0 while it is not open
	// (held.go): the stage is optional and made at its first use, by any
	// process, so it is opened when first needed.
	held atomic.Int32
	// names, when set, says which names of a stage are messages in
	// place of IsMessageName (SetMessageNames), and namesRule says so to
	// an operator (MessageNamesRule).
	names     func(s Stage, name string) bool
	namesRule string
	// doneFiles, when set, says which names of inbox/ are done-files, and
	// which of those have no data file there (SetDoneFiles).
	doneFiles func(name string) (done, orphan bool)
	// announce, when set, names the done-file of a data file, which Hold
	// and Unhold move with it (SetAnnouncer).
	announce Announcer
	// returnsSeen holds the modification times of held/ and error/ when
	// recovery last listed them for return marks (finishStageReturns).
	returnsSeen [2]atomic.Int64
}

// SetMessageNames makes is decide which names of a stage are messages, in
// place of IsMessageName, for the claim scanner (ScanOrdered), Scan, List,
// Inode and the stage counts: for a queue of batch files, whose format
// says which names are data files (in inbox/, once their done-file is
// there). rule says which in a few words, for the operator told of a
// file the queue never takes ("*.csv, *.csv.gz"). Names starting with
// "." never are, whatever is says; is must be safe for concurrent use.
// Call it before the Dir is used.
func (d *Dir) SetMessageNames(is func(s Stage, name string) bool, rule string) {
	d.names, d.namesRule = is, rule
}

// MessageNamesRule says which names of inbox/ are messages, for an
// operator: "NAME.json", or the rule SetMessageNames gave.
func (d *Dir) MessageNamesRule() string {
	if d.names == nil || d.namesRule == "" {
		return "NAME.json"
	}
	return d.namesRule
}

// SetDoneFiles makes is decide which names of inbox/ are done-files, and
// of those which have no data file there (orphan), for the stage counts
// (Stats): a queue of batch files announced by done-files, where such a
// name is no message, and an orphan not even one on its way. is must be
// safe for concurrent use. Call it before the Dir is used.
func (d *Dir) SetDoneFiles(is func(name string) (done, orphan bool)) { d.doneFiles = is }

// SetAnnouncer makes a name the done-file of each data file, for a queue
// of batch files announced by done-files: Hold moves a file's done-file
// into held/ with it, so that it announces no file a producer writes
// under that name meanwhile, and Unhold brings it back as the file's
// announcement under the name the file gets in inbox/, crash-safely
// (returnAnnounced). Call it before the Dir is used.
func (d *Dir) SetAnnouncer(a Announcer) { d.announce = a }

// Takes reports whether name is one the queue takes as a message once it
// is in inbox/, ready or not (a data file waiting for its done-file is
// taken): IsMessageName, or the SetMessageNames rule as it answers for
// the stages other than inbox/. For Enqueue, and for a program that
// checks a name before it writes the file.
func (d *Dir) Takes(name string) bool { return d.IsMessage(Done, name) }

// NotTakenHint says, of names the queue never takes, the first that only
// its case keeps from being taken ("names are case-sensitive: ORDERS.CSV
// is not orders.csv"), or "": an export from Windows is often named in
// capitals, and the rule's patterns are matched as written.
func (d *Dir) NotTakenHint(names []string) string {
	for _, n := range names {
		if l := strings.ToLower(n); l != n && d.Takes(l) {
			return fmt.Sprintf("names are case-sensitive: %s is not %s", n, l)
		}
	}
	return ""
}

// IsMessage reports whether name is a message of stage s by the Dir's
// rule: IsMessageName, or the one SetMessageNames gave.
func (d *Dir) IsMessage(s Stage, name string) bool { return d.isMessage(s, []byte(name)) }

// isMessage is IsMessage for a name still in a directory read buffer.
func (d *Dir) isMessage(s Stage, name []byte) bool {
	if d.names != nil {
		return len(name) > 0 && name[0] != '.' && d.names(s, string(name))
	}
	return isMessageName(name)
}

// IsMessageName reports whether an entry name is a message: it ends in
// ".json" and does not start with "." (temp files, editor swap files and
// in-progress copies stay invisible to consumers).
func IsMessageName(name string) bool { return isMessageName(name) }

// isMessageName is IsMessageName for a name as a string or as bytes still
// in a directory read buffer (ScanOrdered), without a copy.
func isMessageName[T string | []byte](name T) bool {
	const ext = ".json"
	return len(name) > len(ext) && string(name[len(name)-len(ext):]) == ext && name[0] != '.'
}

// Init creates the queue directory, its four stages and held/; it is
// idempotent.
func Init(path string) error {
	for _, s := range append(Stages, Held) {
		if err := os.MkdirAll(filepath.Join(path, string(s)), 0o755); err != nil {
			return fmt.Errorf("init queue: %w", err)
		}
	}
	if err := syncPath(path); err != nil {
		return fmt.Errorf("init queue: %w", err)
	}
	return nil
}

// Open opens an existing queue directory, checking that every stage exists
// and that all of them sit on the queue's filesystem.
func Open(path string) (*Dir, error) {
	var root unix.Stat_t
	if err := unix.Stat(path, &root); err != nil {
		return nil, fmt.Errorf("open queue %s: %w", path, err)
	}
	if root.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, fmt.Errorf("open queue %s: %w: not a directory", path, ErrNotQueue)
	}
	rootfd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open queue %s: %w", path, err)
	}
	d := &Dir{path: path, root: rootfd, fds: make(map[Stage]int, len(Stages))}
	for _, s := range Stages {
		p := filepath.Join(path, string(s))
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			d.Close()
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				return nil, fmt.Errorf("open queue %s: %w: missing %s/ (run spool init)", path, ErrNotQueue, s)
			}
			return nil, fmt.Errorf("open queue %s: %w", p, err)
		}
		d.fds[s] = fd
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			d.Close()
			return nil, fmt.Errorf("open queue %s: %w", p, err)
		}
		if st.Dev != root.Dev {
			d.Close()
			return nil, fmt.Errorf("open queue %s: %w: %s/ is on another filesystem than %s", path, ErrCrossDevice, s, path)
		}
	}
	if err := d.openHeld(false); err != nil {
		d.Close()
		return nil, fmt.Errorf("open queue %s: %w", path, err)
	}
	return d, nil
}

// Path returns the queue directory's path.
func (d *Dir) Path() string { return d.path }

// StagePath returns the path of a stage directory.
func (d *Dir) StagePath(s Stage) string { return filepath.Join(d.path, string(s)) }

// Close releases the stage descriptors.
func (d *Dir) Close() error {
	var errs []error
	for s, fd := range d.fds {
		if err := unix.Close(fd); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", s, err))
		}
		delete(d.fds, s)
	}
	if fd := d.held.Swap(0) - 1; fd >= 0 {
		if err := unix.Close(int(fd)); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", Held, err))
		}
	}
	if d.root >= 0 {
		if err := unix.Close(d.root); err != nil {
			errs = append(errs, fmt.Errorf("close queue: %w", err))
		}
		d.root = -1
	}
	return errors.Join(errs...)
}

// CheckStages fails with ErrStageReplaced when a stage's path names
// another directory than the one Open opened, or none: an operator moved
// inbox/ aside and made a new one, say. A Dir works through descriptors,
// so it would go on using the old directory, and files arriving in the
// new one would wait unseen, with every count saying the queue is empty;
// a long-running consumer calls this at each wake-up, and readiness too.
func (d *Dir) CheckStages() error {
	for _, s := range Stages {
		var open, now unix.Stat_t
		if err := unix.Fstat(d.fd(s), &open); err != nil {
			return fmt.Errorf("check %s: %w", d.StagePath(s), err)
		}
		err := unix.Stat(d.StagePath(s), &now)
		switch {
		case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
			return fmt.Errorf("stage %s %w: %s is gone (restart spool once it is back)", s, ErrStageReplaced, d.StagePath(s))
		case err != nil:
			return fmt.Errorf("check %s: %w", d.StagePath(s), err)
		case now.Dev != open.Dev || now.Ino != open.Ino || open.Nlink == 0:
			// Nlink 0: the open directory was removed, and the new one
			// at the path got its freed inode number (ext4 reuses them).
			return fmt.Errorf("stage %s %w: %s now names another directory (restart spool to use it; files left in the old one are not consumed)", s, ErrStageReplaced, d.StagePath(s))
		}
	}
	return nil
}

// fd returns the descriptor of a stage; for held/, -1 while the queue
// has none (heldFD).
func (d *Dir) fd(s Stage) int {
	if s == Held {
		return d.heldFD()
	}
	return d.fds[s]
}

// Sync makes the entries of the given stages durable (fsync of each stage
// directory), so that renames into or out of them survive a power cut.
func (d *Dir) Sync(stages ...Stage) error {
	for _, s := range stages {
		if err := unix.Fsync(d.fd(s)); err != nil {
			return fmt.Errorf("sync %s: %w", s, err)
		}
	}
	return nil
}

func syncPath(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = unix.Fsync(fd)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	return err
}
