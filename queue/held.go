//go:build linux

package queue

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Held is the stage of the messages an operator holds aside (spool hold,
// docs/DESIGN.md, "Pause and hold"): a file there is in no other stage
// (I1), is never scanned or claimed by a consumer, and goes back to
// inbox/ only when it is released. It is optional: made by Init, and by
// the first hold of a queue made before it existed (EnsureHeld), on the
// queue's filesystem like every stage, since a hold and a release are
// renames.
const Held Stage = "held"

// ErrNotInInbox is wrapped by Hold for a name that is not a message in
// inbox/ (claimed already, processed, or never there).
var ErrNotInInbox = errors.New("not in inbox/")

// ErrNotAnnounced is wrapped by Hold for a data file of inbox/ whose
// done-file is not there yet: its producer may still be writing it, and
// a release, which announces what it returns, would announce it.
var ErrNotAnnounced = errors.New("not announced yet (its done-file is not in inbox/)")

// ErrNotHeld is wrapped by Unhold for a name that is not in held/.
var ErrNotHeld = errors.New("not in held/")

// heldFD returns the descriptor of held/, opening it at its first use
// (another process may have made it since Open), or -1 when the queue has
// no held/.
func (d *Dir) heldFD() int {
	if fd := d.held.Load(); fd > 0 {
		return int(fd - 1)
	}
	if err := d.openHeld(false); err != nil {
		return -1
	}
	return int(d.held.Load() - 1)
}

// openHeld opens held/, if the queue has one, checking that it is on the
// queue's filesystem (ErrCrossDevice otherwise); with create it makes
// held/ first when it is missing, with the queue directory's permission
// bits, and makes its entry durable.
func (d *Dir) openHeld(create bool) error {
	if d.held.Load() > 0 {
		return nil
	}
	if create {
		err := unix.Mkdirat(d.root, string(Held), 0o700)
		switch {
		case err == nil:
			// The queue directory's own permissions (a group's 2770, say):
			// held/ is made by whoever holds first, an operator, and
			// every consumer must be able to set files aside into it.
			var root unix.Stat_t
			if err := unix.Fstat(d.root, &root); err != nil {
				return fmt.Errorf("make %s: %w", d.StagePath(Held), err)
			}
			if err := unix.Fchmodat(d.root, string(Held), root.Mode&0o7777, 0); err != nil {
				return fmt.Errorf("make %s: %w", d.StagePath(Held), err)
			}
			if err := unix.Fsync(d.root); err != nil {
				return fmt.Errorf("make %s: %w", d.StagePath(Held), err)
			}
		case !errors.Is(err, unix.EEXIST):
			return fmt.Errorf("make %s: %w", d.StagePath(Held), err)
		}
	}
	fd, err := unix.Openat(d.root, string(Held), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) && !create {
		return nil // a queue without held/: nothing is held
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", d.StagePath(Held), err)
	}
	var root, st unix.Stat_t
	err = unix.Fstat(d.root, &root)
	if err == nil {
		err = unix.Fstat(fd, &st)
	}
	if err != nil {
		unix.Close(fd)
		return fmt.Errorf("open %s: %w", d.StagePath(Held), err)
	}
	if st.Dev != root.Dev {
		unix.Close(fd)
		return fmt.Errorf("%w: %s/ is on another filesystem than %s", ErrCrossDevice, Held, d.path)
	}
	if !d.held.CompareAndSwap(0, int32(fd)+1) {
		unix.Close(fd) // another goroutine opened it first
	}
	return nil
}

// EnsureHeld makes held/ when the queue has none yet, and opens it.
func (d *Dir) EnsureHeld() error {
	if err := d.openHeld(true); err != nil {
		return fmt.Errorf("held stage: %w", err)
	}
	return nil
}

// HeldFile is a file moved into held/: its name there and its inode.
type HeldFile struct {
	Name string
	Ino  uint64
}

// Hold moves inbox/name into held/ (suffixed on a collision, as every
// move is) and makes both directories durable, so that no consumer claims
// it. It fails with ErrNotInInbox when inbox/ has no message of that
// name: a consumer claimed it first, or it was never there.
func (d *Dir) Hold(name string) (HeldFile, error) {
	if err := CheckName(name); err != nil {
		return HeldFile{}, fmt.Errorf("hold %s: %w", name, err)
	}
	if !d.Takes(name) {
		return HeldFile{}, fmt.Errorf("hold %q: %w", name, ErrNotMessageName)
	}
	if !d.IsMessage(Inbox, name) {
		return HeldFile{}, fmt.Errorf("hold %s: %w", name, ErrNotAnnounced)
	}
	if err := d.EnsureHeld(); err != nil {
		return HeldFile{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd(Inbox), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return HeldFile{}, fmt.Errorf("hold %s: %w", name, ErrNotInInbox)
		}
		return HeldFile{}, fmt.Errorf("hold %s: %w", name, err)
	}
	final, err := moveUnique(d.fd(Inbox), name, d.fd(Held))
	if errors.Is(err, unix.ENOENT) {
		return HeldFile{}, fmt.Errorf("hold %s: %w", name, ErrNotInInbox)
	}
	if err != nil {
		return HeldFile{}, fmt.Errorf("hold %s: %w", name, err)
	}
	if done := d.announce.of(name); done != "" {
		// Its announcement goes with it, named after the name it got
		// there: left in inbox/, it would announce a file a producer
		// writes under that name meanwhile, half-written. A kill before
		// this move leaves it there, as a hold did before.
		if _, err := moveUniqueAs(d.fd(Inbox), done, d.fd(Held), d.announce.of(final)); err != nil && !errors.Is(err, unix.ENOENT) {
			return HeldFile{}, fmt.Errorf("hold %s: its done-file: %w", name, err)
		}
	}
	// The new entry first: a power cut must not lose the file from both.
	if err := d.Sync(Held, Inbox); err != nil {
		return HeldFile{}, fmt.Errorf("hold %s: %w", name, err)
	}
	return HeldFile{Name: final, Ino: st.Ino}, nil
}

// SetAside moves a claim of the session into held/ instead of finishing
// it (its msg_id is held by an operator), and makes both directories
// durable. It returns the file's name there. The claim was never
// recorded: nothing of it is in the ledger but its hold.
func (s *Session) SetAside(c *Claim) (string, error) {
	if err := s.d.EnsureHeld(); err != nil {
		return "", err
	}
	final, err := moveUnique(s.fd, c.Name, s.d.fd(Held))
	if err != nil {
		return "", fmt.Errorf("hold %s: %w", c.Name, err)
	}
	if err := s.d.Sync(Held); err != nil {
		return "", fmt.Errorf("hold %s: %w", c.Name, err)
	}
	if err := s.Sync(); err != nil {
		return "", fmt.Errorf("hold %s: %w", c.Name, err)
	}
	return final, nil
}

// Unhold moves held/name back into inbox/ under the name as (the name it
// had there; suffixed on a collision) and makes both directories
// durable; it returns the name it got. In a queue of batch files
// announced by done-files (SetAnnouncer) the file is announced again
// there, with the done-file Hold moved beside it or a new one, as
// recovery returns a claim (returnAnnounced), so that it is taken. It fails with ErrNotHeld when
// held/ has no such name (released meanwhile).
func (d *Dir) Unhold(name, as string) (string, error) {
	if err := CheckName(name); err != nil {
		return "", fmt.Errorf("release %s: %w", name, err)
	}
	if err := CheckName(as); err != nil || !d.Takes(as) {
		as = name
	}
	fd := d.fd(Held)
	if fd < 0 {
		return "", fmt.Errorf("release %s: %w", name, ErrNotHeld)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return "", fmt.Errorf("release %s: %w", name, ErrNotHeld)
		}
		return "", fmt.Errorf("release %s: %w", name, err)
	}
	heldDone := d.announce.of(name)
	if heldDone != "" && !exists(fd, heldDone) {
		heldDone = "" // held by an older spool, or before the done-file came
	}
	final, _, err := d.returnAnnounced(fd, name, as, st.Ino, heldDone, d.announce)
	if errors.Is(err, unix.ENOENT) {
		return "", fmt.Errorf("release %s: %w", name, ErrNotHeld)
	}
	if err != nil {
		return "", fmt.Errorf("release %s: %w", name, err)
	}
	if err := d.Sync(Inbox, Held); err != nil {
		return "", fmt.Errorf("release %s: %w", name, err)
	}
	return final, nil
}

// ReadHeld reads the message held/name, with the protections of
// Session.Read, for its msg_id; it is never consumed from there.
func (d *Dir) ReadHeld(name string, limit int64) ([]byte, error) {
	fd := d.fd(Held)
	if fd < 0 {
		return nil, fmt.Errorf("read %s/%s: %w", Held, name, ErrNotHeld)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", Held, name, err)
	}
	return readAt(fd, &Claim{Name: name, Ino: st.Ino, Mode: st.Mode, Size: st.Size}, limit, nil)
}
