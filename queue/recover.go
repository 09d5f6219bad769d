//go:build linux

package queue

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Resolver tells recovery where an orphaned claim belongs: Done or Error
// when the ledger holds its outcome (the consumer died after the commit and
// before the move), Inbox when it was never recorded (the message must be
// consumed again, and must not count as a duplicate of itself: I7).
type Resolver func(ctx context.Context, o *Orphan) (Stage, error)

// Orphan is a claim left in processing/ by a dead consumer, as recovery
// finds it.
type Orphan struct {
	// ID is the claim's identity, as Claim.ID was when it was claimed.
	ID    string
	claim Claim
	dirfd int
}

// Name is the file's name in the claim directory (its name in inbox/).
func (o *Orphan) Name() string { return o.claim.Name }

// Read returns the orphan's content with the protections of Session.Read:
// no link followed, no FIFO opened, nothing over limit read. The ledger
// finds a processed claim through its message's key, so the resolver reads
// the message again to learn it.
func (o *Orphan) Read(limit int64) ([]byte, error) {
	return readAt(o.dirfd, &o.claim, limit, nil)
}

// Recovered counts what a recovery pass did.
type Recovered struct {
	Sessions int // dead sessions cleared
	ToInbox  int // unrecorded claims put back
	ToDone   int // recorded claims finished
	ToError  int
	// Returned are the claims put back in inbox/, ToInbox of them, with
	// the names they got there (announced again there when RecoverWith
	// was given an Announcer).
	Returned []RecoveredFile
	// DeadLetters are the claims moved to error/, ToError of them: dead
	// letters whose consumer died after recording them and before the
	// move, which the recovering consumer reports as its own.
	DeadLetters []RecoveredFile
	// Uncalled are, by dead session, the claims recovered whose external
	// call certainly never started (see MarkCalled): the reservations of
	// their msg_ids may be released at once. A claim of a session whose
	// marks cannot be trusted (another host's, or an earlier boot's) is
	// never in it.
	Uncalled map[string][]string
}

// RecoveredFile is a claim that recovery moved out of its dead session.
type RecoveredFile struct {
	Claim  string // the claim's identity (Orphan.ID)
	Name   string // the file's name in the claim directory, its name in inbox/
	Stored string // its name in the stage it was moved to
}

// Total is the number of files recovery moved.
func (r Recovered) Total() int { return r.ToInbox + r.ToDone + r.ToError }

// DefaultLease is how long a session on another host may go without
// renewing its lease before its claims are taken over.
const DefaultLease = 2 * time.Minute

// staleJoin is how old an unpublished session directory must be before it
// is removed: its creator may still be between mkdir and flock.
const staleJoin = time.Minute

// Recover finishes or returns every claim left in processing/ by dead
// consumers. A session on this host is dead when its lock can be taken
// (the kernel released it with the process); a session of another host when
// its lease is older than lease as well. Live sessions are left alone, so
// Recover is safe to run while other consumers work (I6).
func (d *Dir) Recover(ctx context.Context, resolve Resolver, lease time.Duration) (Recovered, error) {
	return d.RecoverWith(ctx, resolve, lease, nil, nil)
}

// SessionState is what a Liveness knows of a session of another host.
type SessionState int

// The states a Liveness reports.
const (
	// SessionUnknown: judge the session by its directory, as Recover
	// does: dead once its mtime is older than the lease and its lock free.
	SessionUnknown SessionState = iota
	// SessionLive: leave it alone.
	SessionLive
	// SessionDead: its lease is gone and it is fenced off (it can commit
	// nothing more): recover it now, whatever its lock says. A frozen
	// process still holds its flock, and on a shared kernel or a network
	// filesystem that lock would keep its claims from recovery forever.
	SessionDead
)

// Liveness judges the sessions of other hosts by a lease kept elsewhere
// than in the queue directory (a shared ledger's, by the database's
// clock), for RecoverWith.
type Liveness interface {
	// Foreign says what session, a session of another host, is.
	Foreign(ctx context.Context, session string) (SessionState, error)
	// Cleared is told that recovery removed session's directory, every
	// claim in it finished or returned: its lease may go.
	Cleared(ctx context.Context, session string) error
}

// RecoverWith is Recover with the sessions of other hosts judged by live
// first (nil: as Recover), and the claims put back in inbox/ announced
// there again by announce (nil: none is), crash-safely
// (Session.ReturnAnnounced): a queue of batch files announced by
// done-files takes a file only once its done-file is there. A session live reports dead is recovered even
// while its process holds its lock, and while that process may still be
// moving its own claims out (it committed their outcomes before it lost
// its lease): a file that is gone when recovery moves it was moved by
// its owner, and a file its owner claimed into the directory after
// recovery listed it leaves the directory in place for the next pass.
func (d *Dir) RecoverWith(ctx context.Context, resolve Resolver, lease time.Duration, live Liveness, announce Announcer) (Recovered, error) {
	var rec Recovered
	host := thisHost()
	proc := d.fd(Processing)
	names, err := readNames(proc)
	if err != nil {
		return rec, fmt.Errorf("recover: %w", err)
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return rec, err
		}
		var st unix.Stat_t
		if err := unix.Fstatat(proc, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return rec, fmt.Errorf("recover %s: %w", name, err)
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		switch {
		case !isDir && IsMessageName(name):
			// A message directly in processing/ was not claimed by spool
			// (claims live in session directories): give it back to inbox/.
			if _, err := moveUnique(proc, name, d.fd(Inbox)); err != nil && !errors.Is(err, unix.ENOENT) {
				return rec, fmt.Errorf("recover %s: %w", name, err)
			}
			rec.ToInbox++
		case !isDir:
			// Not ours: leave it.
		case strings.HasPrefix(name, "."):
		default:
			foreign := sessionHost(name) != host
			state := SessionUnknown
			if foreign && live != nil {
				if state, err = live.Foreign(ctx, name); err != nil {
					return rec, fmt.Errorf("recover %s: %w", name, err)
				}
			}
			if state == SessionLive || (foreign && state == SessionUnknown && time.Since(time.Unix(st.Mtim.Unix())) < lease) {
				continue
			}
			cleared, err := d.recoverSession(ctx, name, resolve, announce, state == SessionDead, &rec)
			if err != nil {
				return rec, err
			}
			if cleared && live != nil {
				if err := live.Cleared(ctx, name); err != nil {
					return rec, fmt.Errorf("recover %s: %w", name, err)
				}
			}
		}
	}
	if err := d.removeStaleJoins(); err != nil {
		return rec, fmt.Errorf("recover: %w", err)
	}
	if err := d.finishStageReturns(announce); err != nil {
		return rec, fmt.Errorf("recover: %w", err)
	}
	if rec.Total() > 0 || rec.Sessions > 0 {
		if err := d.Sync(Processing, Inbox, Done, Error); err != nil {
			return rec, fmt.Errorf("recover: %w", err)
		}
	}
	return rec, nil
}

func sessionHost(id string) string {
	if i := strings.LastIndexByte(id, '@'); i >= 0 {
		return id[i+1:]
	}
	return ""
}

// recoverSession takes a session's lock and, if it was free (or fenced is
// set: the session is fenced off, whatever its lock says), moves every
// claim inside to where the resolver says, then removes the directory. It
// reports whether it removed the directory.
func (d *Dir) recoverSession(ctx context.Context, name string, resolve Resolver, announce Announcer, fenced bool, rec *Recovered) (bool, error) {
	proc := d.fd(Processing)
	fd, err := unix.Openat(proc, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return true, nil // another consumer recovered it meanwhile
		}
		return false, fmt.Errorf("recover %s: %w", name, err)
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return false, fmt.Errorf("recover %s: lock: %w", name, err)
		}
		if !fenced {
			return false, nil // alive
		}
	}
	session := strings.TrimPrefix(name, joinPrefix)
	entries, err := readNames(fd)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, fs.ErrNotExist) {
		// Removed since it was opened: a fenced session's lock does not
		// keep a second recoverer out, and that one finished first.
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("recover %s: %w", name, err)
	}
	marks, claims := readMarks(session, entries)
	claims = doneFilesLast(claims, announce)
	for _, e := range claims {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, e, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // its owner, or another recovery, moved it out
			}
			return false, fmt.Errorf("recover %s/%s: %w", name, e, err)
		}
		id := claimID(session, &st)
		to, err := resolve(ctx, &Orphan{
			ID:    id,
			claim: Claim{Name: e, Ino: st.Ino, Mode: st.Mode, Size: st.Size},
			dirfd: fd,
		})
		if err != nil {
			return false, fmt.Errorf("recover %s/%s: %w", name, e, err)
		}
		var stored string
		if to == Inbox {
			claimedDone := ""
			if a := announce.of(e); a != "" && a != e && exists(fd, a) {
				claimedDone = a
			}
			var doneTo Stage
			stored, doneTo, err = d.returnAnnounced(fd, e, e, st.Ino, claimedDone, announce)
			switch doneTo {
			case Inbox:
				rec.ToInbox++ // the done-file, back as the file's announcement
			case Done:
				rec.ToDone++
			}
		} else {
			stored, err = moveUnique(fd, e, d.fd(to))
		}
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // its owner, or another recovery, moved it out
			}
			return false, fmt.Errorf("recover %s/%s to %s: %w", name, e, to, err)
		}
		if marks.uncalled(session, id) {
			if rec.Uncalled == nil {
				rec.Uncalled = map[string][]string{}
			}
			rec.Uncalled[session] = append(rec.Uncalled[session], id)
		}
		switch to {
		case Done:
			rec.ToDone++
		case Error:
			rec.ToError++
			rec.DeadLetters = append(rec.DeadLetters, RecoveredFile{Claim: id, Name: e, Stored: stored})
		default:
			rec.ToInbox++
			rec.Returned = append(rec.Returned, RecoveredFile{Claim: id, Name: e, Stored: stored})
		}
	}
	if _, err := d.finishReturns(fd, marks.names, announce); err != nil {
		return false, fmt.Errorf("recover %s: %w", name, err)
	}
	if err := marks.remove(fd); err != nil {
		return false, fmt.Errorf("recover %s: remove its marks: %w", name, err)
	}
	if err := unix.Unlinkat(proc, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		if fenced && errors.Is(err, unix.ENOTEMPTY) {
			return false, nil // its owner claimed more meanwhile: the next pass
		}
		return false, fmt.Errorf("recover %s: remove: %w", name, err)
	}
	rec.Sessions++
	return true, nil
}

// readNames lists a directory by descriptor without closing it.
func readNames(dirfd int) ([]string, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	return f.Readdirnames(-1)
}

// removeStaleJoins removes the directories that consumers killed while
// joining left in the queue directory: empty (nothing is claimed into a
// session before it is published), unlocked, and older than staleJoin.
func (d *Dir) removeStaleJoins() error {
	names, err := readNames(d.root)
	if err != nil {
		return err
	}
	for _, name := range names {
		if !strings.HasPrefix(name, joinPrefix) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(d.root, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil ||
			st.Mode&unix.S_IFMT != unix.S_IFDIR || time.Since(time.Unix(st.Mtim.Unix())) < staleJoin {
			continue
		}
		fd, err := unix.Openat(d.root, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
			_ = unix.Unlinkat(d.root, name, unix.AT_REMOVEDIR) // fails harmlessly if not empty
		}
		unix.Close(fd)
	}
	return nil
}

// Claims returns the identities of the claims in processing/, in every
// session directory, live or dead: each may still be recovered, and
// recovery asks the ledger about it, so its ledger records must stay (a
// prune keeps them). Claims finished while Claims runs may or may not be
// listed.
func (d *Dir) Claims() ([]string, error) {
	proc := d.fd(Processing)
	sessions, err := readNames(proc)
	if err != nil {
		return nil, fmt.Errorf("list claims: %w", err)
	}
	var ids []string
	for _, session := range sessions {
		if strings.HasPrefix(session, ".") {
			continue
		}
		fd, err := unix.Openat(proc, session, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // not a session directory, or recovered meanwhile
		}
		names, err := readNames(fd)
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("list claims of %s: %w", session, err)
		}
		for _, name := range names {
			if isMark(name) {
				continue
			}
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue // finished meanwhile
				}
				unix.Close(fd)
				return nil, fmt.Errorf("list claims of %s: %w", session, err)
			}
			ids = append(ids, claimID(session, &st))
		}
		unix.Close(fd)
	}
	return ids, nil
}
