//go:build linux

package queue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// StageStats is what one listing of a stage found, for metrics.
type StageStats struct {
	// Messages counts the message names (for processing/, the claims in
	// every session directory, plus any message left directly in it).
	Messages int
	// Oldest is the time of the stage's oldest message, when Stats was
	// asked for ages and the stage holds one; zero otherwise. In inbox/ it
	// is the earliest modification time, as spool status and lag report
	// it (when the producer wrote the file); in processing/ and error/ the
	// earliest change time, which the rename into the stage sets: how
	// long the oldest claim has been held, or the oldest dead letter has
	// waited for triage.
	Oldest time.Time
	// Waiting counts, in inbox/ only, the data files of a queue of batch
	// files that wait for their done-file (SetMessageNames: the queue
	// takes them, but not yet): not messages yet, so not in Messages, and
	// WaitingOldest is the earliest modification time among them (zero
	// when none waits). A producer that never writes the done-file leaves
	// its file here, which only these say.
	Waiting       int
	WaitingOldest time.Time
	// OrphanDoneFiles counts, in inbox/ only, the done-files whose data
	// file is not there (SetDoneFiles): announced files that never came,
	// or came under another name.
	OrphanDoneFiles int
	// NotTaken counts, in inbox/ only, the entries the queue will never
	// take: not starting with ".", and neither a message, a data file on
	// its way nor a done-file (a .csv.gz where only *.csv is included, a
	// README, a directory). NotTakenNames are the first few of them, in
	// the directory's order.
	NotTaken      int
	NotTakenNames []string
}

// notTakenNames bounds StageStats.NotTakenNames.
const notTakenNames = 3

// statsBuffer is how much of a directory one getdents call reads: a
// million entries take about 600 calls instead of the 5 000 of a
// Readdirnames buffer.
const statsBuffer = 256 << 10

// Stats lists a stage once: its message count, read from the directory's
// entries alone (getdents, no stat and no string per name), and with ages
// the oldest message's time (one lstat per message). It is the cost of a
// metrics refresh, so a million files in done/ are counted without
// allocating per name.
func (d *Dir) Stats(s Stage, ages bool) (StageStats, error) {
	var st StageStats
	if d.fd(s) < 0 {
		return st, nil // a queue without held/ holds nothing there
	}
	by := func(x *unix.Stat_t) unix.Timespec { return x.Ctim }
	if s == Inbox {
		by = func(x *unix.Stat_t) unix.Timespec { return x.Mtim }
	}
	buf := make([]byte, statsBuffer)
	var oldest unix.Timespec
	found := false
	visit := func(dirfd int, name []byte) {
		st.Messages++
		if !ages {
			return
		}
		var x unix.Stat_t
		if unix.Fstatat(dirfd, string(name), &x, unix.AT_SYMLINK_NOFOLLOW) != nil {
			return // gone meanwhile
		}
		if t := by(&x); !found || t.Nano() < oldest.Nano() {
			oldest, found = t, true
		}
	}
	err := eachEntry(d.fd(s), buf, func(name []byte, typ uint8) error {
		if d.isMessage(s, name) {
			visit(d.fd(s), name)
			return nil
		}
		if s == Inbox && d.names != nil && d.isMessage(Done, name) {
			d.waiting(&st, name)
			return nil
		}
		if s == Inbox && name[0] != '.' {
			if d.doneFiles != nil {
				if done, orphan := d.doneFiles(string(name)); done {
					if orphan {
						st.OrphanDoneFiles++
					}
					return nil
				}
			}
			st.NotTaken++
			if len(st.NotTakenNames) < notTakenNames {
				st.NotTakenNames = append(st.NotTakenNames, string(name))
			}
			return nil
		}
		if s != Processing || name[0] == '.' || (typ != unix.DT_DIR && typ != unix.DT_UNKNOWN) {
			return nil
		}
		// A session directory: its claims.
		fd, err := unix.Openat(d.fd(s), string(name), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil // not a directory, or recovered meanwhile
		}
		defer unix.Close(fd)
		return eachEntry(fd, make([]byte, 64<<10), func(claim []byte, _ uint8) error {
			if d.isMessage(Processing, claim) {
				visit(fd, claim)
			}
			return nil
		})
	})
	if err != nil {
		return StageStats{}, fmt.Errorf("stats %s: %w", s, err)
	}
	if found {
		st.Oldest = time.Unix(oldest.Unix())
	}
	return st, nil
}

// waiting counts the data file name of inbox/, which waits for its
// done-file, into st.
func (d *Dir) waiting(st *StageStats, name []byte) {
	var x unix.Stat_t
	if unix.Fstatat(d.fd(Inbox), string(name), &x, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return // gone meanwhile
	}
	st.Waiting++
	if t := time.Unix(x.Mtim.Unix()); st.WaitingOldest.IsZero() || t.Before(st.WaitingOldest) {
		st.WaitingOldest = t
	}
}

// eachEntry calls fn with the name and type of every entry of the
// directory dirfd (but . and ..), reading it through a descriptor of its
// own with buf. The name is only valid during the call.
func eachEntry(dirfd int, buf []byte, fn func(name []byte, typ uint8) error) error {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		for off := 0; off < n; {
			name := direntName(buf[off:n])
			typ := buf[off+18]
			off += int(binary.NativeEndian.Uint16(buf[off+16:]))
			if len(name) == 0 || string(name) == "." || string(name) == ".." {
				continue
			}
			if err := fn(name, typ); err != nil {
				return err
			}
		}
	}
}
