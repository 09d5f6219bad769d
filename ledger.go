package spool

import (
	"context"
	"errors"
	"os"
	"time"
)

// Outcome is what became of one delivery (one claimed file).
type Outcome string

// The outcomes of a delivery.
const (
	// OutcomeProcessed: the first delivery of its msg_id; a row was inserted
	// into processed. The file goes to done/.
	OutcomeProcessed Outcome = "processed"
	// OutcomeDuplicate: processed already held the msg_id; the constraint
	// absorbed it and the duplicate was recorded. The file goes to done/.
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeDeadLetter: the message was rejected; a dead-letter record holds
	// reason and detail. The file goes to error/.
	OutcomeDeadLetter Outcome = "dead-letter"
	// OutcomeRetry: the handler failed transiently; nothing of the message
	// was recorded but its attempt. The file waits in processing/ until
	// the Result's RetryAt, then goes back to inbox/. Never stored as a
	// delivery's outcome.
	OutcomeRetry Outcome = "retry"
	// OutcomeReserved: Ledger.Reserve reserved the msg_id for this
	// delivery; its call may be made. Never stored as an outcome.
	OutcomeReserved Outcome = "reserved"
	// OutcomeBusy: Ledger.Reserve found the msg_id reserved for
	// another delivery whose call is in flight; this one is held and
	// presented again. Never stored as an outcome.
	OutcomeBusy Outcome = "busy"
)

// Delivery is one claimed file on its way through the ledger, as the
// consumer found it. Ledgers and handlers read it and never modify it: what
// became of it is a Result.
type Delivery struct {
	// Claim is the identity of this claim: unique across all claims ever
	// made, and derivable again from the claimed file while it sits in
	// processing/ (I7). A recovering consumer asks the ledger about it.
	Claim string
	// File is the name the message had in inbox/.
	File string
	// Ino is the claimed file's inode number; with the claim it lets reports
	// find a dead letter's record after the file was renamed.
	Ino uint64
	// Consumer identifies the consumer that claimed it (host, pid, random).
	Consumer string
	// Hash is the hex SHA-256 of the content; empty when it was not read.
	Hash string
	// Size is the file's size in bytes.
	Size int64
	// Message is set for a valid message, Reject for a poison one; exactly
	// one of them is non-nil when the delivery is recorded.
	Message *Message
	Reject  *RejectError
	// Claimed is when the consumer started claiming it; At is when it
	// finished inspecting it.
	Claimed time.Time
	At      time.Time
	// Outbox is how a Handler's events reach the ledger's outbox (Emit):
	// a Ledger with an outbox sets it on the delivery it gives a
	// Handler for the length of that call, in the transaction that
	// records it, and puts back what was there after. It is nil
	// everywhere else (the deliveries a consumer makes, a Caller's,
	// OnDelivery's), and nothing but a ledger sets it.
	Outbox Emitter
	// CallsLock is the consumer session's calls lock: a consumer sets it on
	// the delivery it gives a call of a Caller that holds the lock (see
	// LockingCaller), and it is nil everywhere else (the deliveries it
	// records, OnDelivery's). The file belongs to the consumer: pass it
	// on, open (exec.Cmd.ExtraFiles), never close it.
	CallsLock *os.File
}

// Result is what a ledger recorded for one delivery of a batch.
type Result struct {
	// Outcome is where the delivery's file goes: done/ for OutcomeProcessed
	// and OutcomeDuplicate, error/ for OutcomeDeadLetter, back to inbox/
	// once RetryAt has passed for OutcomeRetry.
	Outcome Outcome
	// Reject says why a dead letter was dead-lettered: the delivery's own
	// Reject for a poison message, the handler's failure (ReasonHandler,
	// ReasonRetriesExhausted, with its error as the detail) for a valid one.
	// Nil for the other outcomes.
	Reject *RejectError
	// After a handler failed (OutcomeRetry, or a dead letter with a
	// handler's reason): the attempts made at the msg_id so far, this one
	// included, and the handler's error. RetryAt is when a retry is due.
	Attempts int
	Err      error
	RetryAt  time.Time
	// Conflict marks a duplicate whose content differs from the processed
	// row's: the same msg_id with another body, a producer's bug or
	// tampering rather than an ordinary redelivery. The ledger sets it
	// when it records the duplicate (the deliveries row's conflict flag),
	// so that metrics and alerts see it as it happens; false for every
	// other outcome.
	Conflict bool
}

// CallOwner is the consumer session that reserves msg_ids for its calls
// (Ledger.Reserve), with its call bound: the longest one of its calls may
// run (its Caller's CallTimeout, else Config.Lease). A consumer that finds
// the session dead holds those msg_ids for that long, by the dead
// session's bound rather than its own, so that a consumer restarted with
// a shorter timeout never calls a msg_id whose first call may still run.
type CallOwner struct {
	Session   string
	CallBound time.Duration
}

// Ledger is the idempotent record of every delivery: the one interface
// the consumer needs of its ledger, whatever it is configured to do.
// package ledger implements all of it on every engine; the
// methods a configuration does not use (Reserve without a Caller, the
// batch progress without Config.Batch) are simply not called. The
// consumer does not close its ledger: whoever opened it does.
//
// Every write (Record, RecordBatch, RecordHeld, Reserve,
// Settle) commits in one durable transaction before it returns a nil
// error (I3), and commits nothing of its batch when it fails. After
// AcquireSessionLease(session), on an engine that HoldsLeases, each of
// them whose deliveries carry session as their Consumer checks in its own
// transaction that the session's lease was not taken over, and fails with
// ErrLeaseLost if it was: a takeover and a write of the session are
// serialised by the database, so a recovering consumer that took the
// lease over sees every outcome the session committed, and the session
// commits nothing after.
type Ledger interface {
	// Record commits a batch of deliveries and returns what became of
	// each, results[i] for batch[i]: a valid message is inserted into
	// processed with ON CONFLICT (msg_id) DO NOTHING, and is a duplicate
	// when nothing was inserted; a rejected one gets a dead-letter
	// record. On error there are no results. Deliveries within a batch
	// are applied in slice order, so of two deliveries of one msg_id the
	// earlier one is processed. Record does not modify the deliveries.
	//
	// With w.Handler set, it is called for every delivery that inserts
	// its processed row, inside a savepoint of the batch's transaction;
	// the zero Work records alone. On success the result is
	// OutcomeProcessed. When the handler fails, the savepoint is rolled
	// back (the processed row and the handler's writes with it), the
	// ledger counts the attempt, and w.Decide says what becomes of the
	// message: a dead letter, recorded with the verdict's reason, the
	// error as its detail and the attempts made; or a retry, recorded
	// with the attempt count and the verdict's RetryAt for RetrySchedule.
	// The result carries the verdict, the attempts and the error. A
	// verdict that is neither a dead letter with a reason nor a retry
	// with a time fails the batch.
	Record(ctx context.Context, batch []*Delivery, w Work) ([]Result, error)
	// ClaimOutcome returns the outcome recorded for a claim identity, and
	// false when the claim was never recorded (its consumer died before the
	// commit, so the message must be consumed again). msgID is the key of
	// the claimed message when its file still parses, "" otherwise: a
	// processed delivery is recorded by its processed row alone (one row a
	// message, not two), and is found through that row's key.
	ClaimOutcome(ctx context.Context, claim, msgID string) (Outcome, bool, error)
	// ClaimReject returns the reason recorded for the dead letter of
	// claim, with its msg_id when the record has one (RejectError.MsgID),
	// and false when the claim is not recorded as one. Recovery reports
	// with it a dead letter whose consumer died after recording it and
	// before moving it to error/, as that consumer would have (the "dead
	// letter" log line, the Observer, Config.OnDelivery and so
	// --on-dead-letter), so that none reaches error/ unannounced.
	ClaimReject(ctx context.Context, claim string) (*RejectError, bool, error)
	// RetrySchedule returns the msg_ids waiting for a retry and when each is
	// due, so a consumer that claims one early holds it until then.
	RetrySchedule(ctx context.Context) (map[string]time.Time, error)
	// ConcurrentWrites is how many write transactions may usefully run
	// at once, at least 1: a consumer with a Caller then reserves the
	// next batches and commits that many groups of outcomes side by side,
	// which an engine whose transactions lock rows (PostgreSQL) needs to
	// keep hundreds of calls busy, and a drain without a Handler or a
	// Caller makes that many Record calls at once, never two at once that
	// share a msg_id. A single-writer engine (SQLite) says 1.
	ConcurrentWrites() int

	// Reserve records the batch's dead letters and its duplicates (valid
	// deliveries whose msg_id processed holds already), and reserves for
	// owner (the consumer's session) the msg_id of every other valid
	// delivery, so that no two calls of a Caller for one msg_id run at
	// once on any consumer of the ledger: results[i].Outcome is the
	// recorded outcome, OutcomeReserved (call it now), or OutcomeBusy (the
	// msg_id is reserved already, by anyone, for another delivery: present
	// it again later). Of two deliveries of one msg_id in the batch, the
	// earlier is the one reserved. Each reservation keeps owner's
	// CallBound, which ReservationOwners returns.
	Reserve(ctx context.Context, batch []*Delivery, owner CallOwner) ([]Result, error)
	// Settle commits what the calls of reserved deliveries came to,
	// errs[i] for batch[i]: a nil error inserts the processed row; a
	// failure is counted and decided by decide, as in Record. Each
	// delivery's reservation is removed in the same transaction.
	Settle(ctx context.Context, batch []*Delivery, errs []error, decide func(Failure) Verdict) ([]Result, error)
	// ReservationOwners lists the sessions that hold reservations, each
	// with the longest CallBound its reservations were made with (zero
	// when none recorded one: reservations of a spool before the bound
	// was kept).
	ReservationOwners(ctx context.Context) ([]CallOwner, error)
	// ReleaseReservations removes the reservations of owner, and returns
	// how many there were: a session known to be dead and recovered, or
	// the consumer's own session at a graceful stop that cut no call
	// short, once none of its calls is in flight, before it gives back
	// the claims it did not call.
	ReleaseReservations(ctx context.Context, owner string) (int, error)
	// ReleaseClaims removes the reservations that owner holds for the
	// claims (Delivery.Claim), and returns how many there were: a
	// recovery releases at once the msg_ids of a dead session's claims
	// whose call never started, and a graceful stop whose shutdown
	// timeout cut calls short gives back the claims it never called,
	// keeping the reservations of those it cut.
	ReleaseClaims(ctx context.Context, owner string, claims []string) (int, error)

	// HoldsLeases reports whether the ledger's engine keeps the leases of
	// the consumer sessions sharing it, for a ledger shared by hosts: a
	// lease row per session, judged by the database's own clock, so that
	// no two hosts need synchronized clocks, and a fence on every write
	// of a session's claims. False for a ledger of one host (SQLite),
	// whose sessions are judged by their directory's lock alone; the
	// lease methods are then not to be called.
	HoldsLeases() bool
	// AcquireSessionLease creates session's lease, expiring d from now by the
	// ledger's clock, and fences this ledger's writes of its claims.
	AcquireSessionLease(ctx context.Context, session string, d time.Duration) error
	// RenewSessionLease pushes session's expiry to d from now by the ledger's
	// clock; ErrLeaseLost when it was taken over (or is gone).
	RenewSessionLease(ctx context.Context, session string, d time.Duration) error
	// TakeOverSessionLease takes another session's lease over if it has expired
	// by the ledger's clock, and says what the lease is now.
	TakeOverSessionLease(ctx context.Context, session string) (LeaseState, error)
	// DropSessionLease removes session's lease: its own at a clean close, or a
	// dead session's once its directory is recovered.
	DropSessionLease(ctx context.Context, session string) error

	// Holds returns the operator's pause of the queue and the msg_ids
	// held, which a consumer reads every Config.HoldInterval and honours.
	// When version is the ledger's current Version, MsgIDs is nil: a poll
	// of an unchanged ledger reads one row.
	Holds(ctx context.Context, version int64) (Holds, error)
	// RecordHeld records a delivery a consumer moved into held/ because
	// its msg_id was held, in one transaction that first checks, locking
	// it against a release, that the msg_id is still held. It reports
	// false, and records nothing, when it is not (released meanwhile):
	// the consumer then puts the file back into inbox/ itself, so that a
	// release never misses a file set aside as it ran.
	RecordHeld(ctx context.Context, h HeldAside) (bool, error)

	// RecordBatch is Record with p, a batch file's progress, written
	// in the same transaction, so that the records committed and the
	// position after them are one.
	RecordBatch(ctx context.Context, batch []*Delivery, w Work, p BatchProgress) ([]Result, error)
	// BatchProgress returns the progress kept for the file identity
	// file, and false when there is none.
	BatchProgress(ctx context.Context, file string) (BatchProgress, bool, error)
	// DeadLetterIno reports whether a dead letter is recorded with the
	// inode ino (Delivery.Ino).
	DeadLetterIno(ctx context.Context, ino uint64) (bool, error)
	// SetDeadLetterFile names the file in error/, and its inode, of the
	// dead letter recorded for claim: a record its handler dead-lettered,
	// whose file is written after the commit.
	SetDeadLetterFile(ctx context.Context, claim, file string, ino uint64) error
	// UnwrittenDeadLetters returns the claims of batch's dead letters
	// whose file column still starts with origin (the batch file's name
	// and "#"): recorded, their file not yet written or named.
	UnwrittenDeadLetters(ctx context.Context, batch, origin string) ([]string, error)
}

// ErrLedgerClosed is returned by a ledger used after Close.
var ErrLedgerClosed = errors.New("ledger closed")

// Work is what a Ledger's Record runs for each first delivery inside the
// transaction that records its batch, and how the failures of that work are
// decided.
type Work struct {
	// Handler is called once for each delivery whose processed row the
	// batch inserts; never for a duplicate. Nil: the work is Record's.
	Handler Handler
	// Decide turns each failure of Handler into a retry or a dead letter;
	// the ledger records its verdict as it is. It is called inside the
	// transaction, after the handler's writes were rolled back, and must
	// not block. Required with a Handler; a consumer passes its
	// Config.Retry's Decide.
	Decide func(Failure) Verdict
}
