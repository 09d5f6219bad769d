package spool

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spoolq/spool/queue"
)

// Recover finishes or returns the claims that dead consumers left in
// processing/, as Drain and Watch do when they start, and returns how many
// it moved. It is safe while other consumers run (I6).
func (c *Consumer) Recover(ctx context.Context) (int, error) {
	r, err := c.RecoverAll(ctx)
	return r.Claims, err
}

// Recovery is what a recovery did (RecoverAll).
type Recovery struct {
	// Claims is the number of claims of dead consumers moved out of
	// processing/, as Recover counts them.
	Claims int
	// Released are the dead sessions whose reservations were released.
	Released []ReleasedReservations
	// CallsLocksRemoved are the dead sessions whose calls lock was
	// removed, holding no reservation any more.
	CallsLocksRemoved []string
}

// ReleasedReservations is a dead session whose reservations a recovery
// released, and the proof that none of its calls can still run.
type ReleasedReservations struct {
	Session      string
	Reservations int
	Proof        string // ProofCallsLock or ProofCallBound
}

// RecoverAll is Recover, and says what else the recovery did: the
// reservations of dead sessions it released (see releaseDeadReservations:
// a consumer without a Caller releases those whose calls lock is free,
// the one proof it can take), and the calls locks it removed. spool fsck
// --repair reports them.
func (c *Consumer) RecoverAll(ctx context.Context) (Recovery, error) {
	var st Stats
	var r Recovery
	err := c.recover(ctx, &st, &r)
	r.Claims = st.Recovered
	return r, err
}

// recover runs one recovery, adding what it moved to st.Recovered, and
// what it released to r when r is not nil. A running session calls it
// from its recovery clock and from the run goroutine (recoverer), while
// its passes run; recoverMu keeps them, and Recover, one at a time.
func (c *Consumer) recover(ctx context.Context, st *Stats, r *Recovery) error {
	c.recoverMu.Lock()
	defer c.recoverMu.Unlock()
	var live queue.Liveness
	if ll := leaseLedger(c.ledger); ll != nil {
		live = ledgerLiveness{ll: ll, log: c.log}
	}
	rec, err := c.dir.RecoverWith(ctx, c.resolve, c.cfg.Lease, live, c.announcer())
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	if rec.Total() > 0 {
		c.log.Info("recovered claims of dead consumers", "sessions", rec.Sessions,
			"to_inbox", rec.ToInbox, "to_done", rec.ToDone, "to_error", rec.ToError)
		c.cfg.Observer.Recovered(rec.Total())
	}
	st.Recovered += rec.Total()
	if err := c.reportRecovered(ctx, rec.DeadLetters); err != nil {
		return err
	}
	if err := c.releaseUncalled(ctx, rec.Uncalled); err != nil {
		return err
	}
	return c.releaseDeadReservations(ctx, r)
}

// releaseUncalled releases at once the reservations of the claims of dead
// sessions whose call never started (queue.Recovered.Uncalled): reserved
// ahead of their calls, they waited for a slot, their order key or a
// pause when their consumer died, so no call of them can be running. The
// others are held (releaseDeadReservations). A reservation of a session
// whose claim was not recovered (it was settled meanwhile) is not there.
func (c *Consumer) releaseUncalled(ctx context.Context, uncalled map[string][]string) error {
	if c.cfg.Caller == nil {
		return nil // as releaseDeadReservations: a consumer without a Caller releases none
	}
	for o, claims := range uncalled {
		if o == c.ownSession() {
			continue
		}
		n, err := c.ledger.ReleaseClaims(ctx, o, claims)
		if err != nil {
			return fmt.Errorf("recover reservations: %w", err)
		}
		if n > 0 {
			c.log.Info("released the reservations of a dead consumer's claims whose call never started",
				"session", o, "reservations", n)
		}
	}
	return nil
}

// ledgerLiveness judges the sessions of other hosts by their leases in a
// ledger that keeps them: a session whose lease expired by the database's
// clock is taken over, fenced off, and recovered at once, whatever its
// directory's lock and mtime say; a session the ledger holds no lease for
// (one that joined before the ledger kept leases) is judged by its
// directory, as without a ledger's leases.
type ledgerLiveness struct {
	ll  Ledger // one that HoldsLeases
	log interface {
		Info(msg string, args ...any)
	}
}

func (v ledgerLiveness) Foreign(ctx context.Context, session string) (queue.SessionState, error) {
	st, err := v.ll.TakeOverSessionLease(ctx, session)
	if err != nil {
		return queue.SessionUnknown, err
	}
	switch st {
	case LeaseLive:
		return queue.SessionLive, nil
	case LeaseTaken:
		v.log.Info("took over the claims of a consumer whose lease expired", "session", session)
		return queue.SessionDead, nil
	}
	return queue.SessionUnknown, nil
}

func (v ledgerLiveness) Cleared(ctx context.Context, session string) error {
	return v.ll.DropSessionLease(ctx, session)
}

// reportRecovered reports the dead letters recovery moved to error/ as the
// consumer that recorded them would have, had it lived to move them: one
// "dead letter" line each, the Observer, OnDelivery (and so an operator's
// notification). The reason is the ledger's record of it (Ledger.ClaimReject).
func (c *Consumer) reportRecovered(ctx context.Context, dead []queue.RecoveredFile) error {
	for _, f := range dead {
		d := &Delivery{Claim: f.Claim, File: f.Name}
		r := Result{Outcome: OutcomeDeadLetter}
		rej, ok, err := c.ledger.ClaimReject(ctx, f.Claim)
		if err != nil {
			return fmt.Errorf("recover %s: %w", f.Name, err)
		}
		if ok {
			r.Reject = rej
		}
		reason, detail := "", ""
		if r.Reject != nil {
			reason, detail = string(r.Reject.Reason), r.Reject.Error()
		}
		c.log.Info("dead letter", "file", f.Name, "stored", f.Stored, "reason", reason, "detail", detail, "recovered", true)
		c.cfg.Observer.Delivered(d, r)
		if c.cfg.OnDelivery != nil {
			c.cfg.OnDelivery(d, r, f.Stored)
		}
	}
	return nil
}

// releaseDeadReservations removes the reservations of dead sessions once
// their calls can no longer be running, so that no two calls for one
// msg_id run at once even across a kill (see Caller).
//
// A live session's directory is in processing/ for as long as it holds a
// reservation (a reserved claim sits in it until its outcome is committed,
// which removes the reservation), so an owner whose directory is gone is
// dead and recovered: on this host at once, since recovery saw its lock
// free; on another host once its lease expired (queue.Dir.Recover). But a
// dead session's calls may outlive it: an HTTP request it sent runs on at
// the server, an Exec's processes may run on, and so do the calls that a
// graceful stop cut short (leaveCut). The reservations of its claims
// whose call never started are released by the recovery already
// (releaseUncalled). The others stay, and the deliveries of those msg_ids
// are held (OutcomeBusy), while this consumer calls every other msg_id,
// until one of (callsEnded):
//
//   - the session's calls lock is free (queue.Dir.ProbeCalls): its Caller
//     held it in every call (LockingCaller), and the lock names this
//     boot, so no process of its calls is left on this kernel, in
//     whatever PID namespace it ran. A CallReaper first kills what it can
//     see of them; what it does not see proves nothing;
//   - the bound of one of its calls (CallTimeout for a TimeoutCaller,
//     else Config.Lease, which any call must keep within), as the dead
//     session recorded it with its reservations (CallOwner), has passed
//     since this consumer first found the session dead. Every call of the
//     session started before its death and was bound to end within its
//     timeout of its start, so by then none can be running, but for a
//     process that outlived its consumer, which is not waited for longer
//     (a warning names it if it holds the lock). The time is this
//     consumer's own observation, which comes after the death, not a time
//     read from the ledger: the reservation's time says when the msg_id
//     was reserved, not when its call began (it may wait for a slot or a
//     pause). A consumer restarted meanwhile starts its own clock: it
//     waits longer, never less.
//
// The calls lock of a released session is removed with its reservations,
// and so is that of a session gone from processing/ that holds none. The
// consumer's own session is never taken for dead. A consumer without a
// Caller (spool fsck --repair's, a consumer without a handler) takes only
// the first proof: it has no call bound of its own and no CallReaper,
// and it holds no msg_id of its own for a call. What it released and
// removed goes to r when r is not nil.
func (c *Consumer) releaseDeadReservations(ctx context.Context, r *Recovery) error {
	// Listed before the owners: a session gone from processing/ takes no
	// reservation any more, so one that is not among the owners read
	// after this holds none and never will.
	locks, err := c.dir.DeadCallsLocks()
	if err != nil {
		return fmt.Errorf("recover reservations: %w", err)
	}
	if c.cfg.Caller == nil && len(locks) == 0 {
		return nil // a consumer without a Caller asks the ledger only for them
	}
	owners, err := c.ledger.ReservationOwners(ctx)
	if err != nil {
		return fmt.Errorf("recover reservations: %w", err)
	}
	own := c.ownSession()
	present := make(map[string]bool, len(owners))
	for _, owner := range owners {
		o := owner.Session
		present[o] = true
		if o == own {
			continue
		}
		live, err := c.dir.HasSession(o)
		if err != nil {
			return fmt.Errorf("recover reservations: %w", err)
		}
		if live {
			continue
		}
		var ended bool
		var proof string
		if c.cfg.Caller == nil {
			state, err := c.dir.ProbeCalls(o)
			ended, proof = err == nil && state == queue.CallsGone, ProofCallsLock
		} else {
			ended, proof = c.callsEnded(o, c.deadBound(owner.CallBound))
		}
		if !ended {
			continue
		}
		n, err := c.ledger.ReleaseReservations(ctx, o)
		if err != nil {
			return fmt.Errorf("recover reservations: %w", err)
		}
		c.forgetDead(o)
		if n > 0 {
			c.log.Info("released reservations of a dead consumer", "session", o, "reservations", n, "proof", proof)
			if r != nil {
				r.Released = append(r.Released, ReleasedReservations{Session: o, Reservations: n, Proof: proof})
			}
		}
		if err := c.dir.RemoveCallsLock(o); err != nil {
			return fmt.Errorf("recover reservations: %w", err)
		}
	}
	for _, o := range locks {
		if !present[o] {
			if err := c.dir.RemoveCallsLock(o); err != nil {
				return fmt.Errorf("recover reservations: %w", err)
			}
			if r != nil {
				r.CallsLocksRemoved = append(r.CallsLocksRemoved, o)
			}
		}
	}
	c.deadMu.Lock()
	for o := range c.dead {
		if !present[o] {
			delete(c.dead, o) // released by another consumer
		}
	}
	c.deadMu.Unlock()
	return nil
}

// deadOwner is a dead session holding reservations, as this consumer
// found it.
type deadOwner struct {
	since  time.Time // when this consumer first found it dead
	reaped time.Time // when it last asked the CallReaper
	asked  bool      // callsEnded was asked before: the hold is logged once
}

// reapEvery bounds how often a dead session's calls are looked for and
// killed: a process that will not die (in uninterruptible sleep) is not
// looked for at every pass. Its calls lock is probed at every pass.
const reapEvery = time.Second

// Proofs that a dead session's calls cannot be running, as the release
// of its reservations logs them (ReleasedReservations.Proof).
const (
	ProofCallsLock = "calls lock free"
	ProofCallBound = "call bound passed"
)

// callsEnded reports whether none of the dead session o's calls can be
// running any more, bound being the longest one of them may run, and how
// that is known (see releaseDeadReservations).
func (c *Consumer) callsEnded(o string, bound time.Duration) (bool, string) {
	now := time.Now()
	c.deadMu.Lock()
	if c.dead == nil {
		c.dead = map[string]*deadOwner{}
	}
	d, ok := c.dead[o]
	if !ok {
		d = &deadOwner{since: now}
		c.dead[o] = d
	}
	reap := now.Sub(d.reaped) >= reapEvery
	if reap {
		d.reaped = now
	}
	since, logged := d.since, d.asked
	d.asked = true
	c.deadMu.Unlock()
	if r, isReaper := c.cfg.Caller.(CallReaper); isReaper && reap && strings.HasSuffix(o, "@"+queue.Host()) {
		// What it kills frees the calls lock sooner; what it does not
		// find may run in another PID namespace.
		if err := r.ReapCalls(o); err != nil {
			c.log.Warn("cannot look for the calls of a dead consumer", "session", o, "err", err)
		}
	}
	state, err := c.dir.ProbeCalls(o)
	if err != nil && !logged {
		c.log.Warn("cannot probe the calls lock of a dead consumer: its msg_ids are held for the call bound", "session", o, "err", err)
	}
	if state == queue.CallsGone {
		return true, ProofCallsLock
	}
	if !logged {
		c.log.Info("holding the msg_ids whose calls a dead consumer may still be running, until they cannot be",
			"session", o, "calls_lock", state.String(), "until", since.Add(bound))
	}
	if now.Sub(since) < bound {
		return false, ""
	}
	if state == queue.CallsRunning {
		c.log.Warn("releasing the msg_ids of a dead consumer at the call bound, although processes of its calls still hold its calls lock: they outlived their consumer and the bound",
			"session", o, "calls_lock", filepath.Join(c.dir.Path(), queue.CallsLockDir, o))
	}
	return true, ProofCallBound
}

// forgetDead drops a dead session whose reservations are released.
func (c *Consumer) forgetDead(o string) {
	c.deadMu.Lock()
	delete(c.dead, o)
	c.deadMu.Unlock()
}

// callBound is how long one call may run: its CallTimeout, or for a
// Caller without one the lease, within which every call must end for a
// claim never to be taken over while its call runs.
func (c *Consumer) callBound() time.Duration {
	if t, ok := c.cfg.Caller.(TimeoutCaller); ok {
		return t.CallTimeout()
	}
	return c.cfg.Lease
}

// callOwner is session as the owner of the reservations it makes, with
// this consumer's call bound, which a consumer that finds it dead holds
// its msg_ids for (callsEnded).
func (c *Consumer) callOwner(session string) CallOwner {
	return CallOwner{Session: session, CallBound: c.callBound()}
}

// deadBound is how long after finding it dead the msg_ids of a dead
// session are held without a proof that its calls ended: the bound its
// reservations recorded, the dead session's own, whatever this
// consumer's is; for reservations of an older spool, which recorded
// none, this consumer's.
func (c *Consumer) deadBound(recorded time.Duration) time.Duration {
	if recorded > 0 {
		return recorded
	}
	return c.callBound()
}

// resolve maps a recorded claim to the stage its outcome sends it to; an
// unrecorded claim goes back to inbox/ to be consumed as a new claim (I7).
// The file is read and parsed again for its msg_id, by which the ledger
// finds a processed claim; a file that does not parse was a dead letter,
// found by its claim alone.
func (c *Consumer) resolve(ctx context.Context, orphan *queue.Orphan) (queue.Stage, error) {
	if c.cfg.Batch != nil && c.cfg.Batch.IsDoneFile(orphan.Name()) {
		// Claimed with its data file (claimDoneFile): when that one goes
		// back to inbox/, recovery takes this one with it as its
		// announcement, under the name the data file gets there
		// (queue.Announcer). Left alone here, its data file was finished
		// or never claimed: back in inbox/ under its old name, it could
		// announce a file a producer writes meanwhile, before it is
		// finished.
		return queue.Done, nil
	}
	var msgID string
	data, err := orphan.Read(c.cfg.Contract.Limit())
	var tooLarge *queue.TooLargeError
	switch {
	case err == nil:
		if msg, err := c.cfg.Contract.Parse(data); err == nil {
			msgID = msg.MsgID
		}
	case errors.Is(err, queue.ErrNotRegular), errors.As(err, &tooLarge):
	default:
		// Unreadable now: it was a dead letter if it was unreadable then
		// too, and its claim finds it.
		c.log.Warn("recovery cannot read a claim; looking it up by claim alone",
			"file", orphan.Name(), "claim", orphan.ID, "err", err)
	}
	o, ok, err := c.ledger.ClaimOutcome(ctx, orphan.ID, msgID)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return queue.Inbox, nil
	case o == OutcomeDeadLetter:
		return queue.Error, nil
	default:
		return queue.Done, nil
	}
}
