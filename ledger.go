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
	// OutcomeReserved: CallLedger.Reserve reserved the msg_id for this
	// delivery; its call may be made. Never stored as an outcome.
	OutcomeReserved Outcome = "reserved"
	// OutcomeBusy: CallLedger.Reserve found the msg_id reserved for
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
	// a WorkLedger with an outbox sets it on the delivery it gives a
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

// Ledger is the idempotent record of every delivery. The consumer needs only
// these methods; reports use the concrete ledger package.
type Ledger interface {
	// Record commits a batch of deliveries in one durable transaction and
	// returns what became of each, results[i] for batch[i]: a valid message
	// is inserted into processed with ON CONFLICT (msg_id) DO NOTHING, and
	// is a duplicate when nothing was inserted; a rejected one gets a
	// dead-letter record. When Record returns a nil error the commit is on
	// stable storage (I3). On error nothing of the batch is committed and
	// there are no results. Deliveries within a batch are applied in slice
	// order, so of two deliveries of one msg_id the earlier one is
	// processed. Record does not modify the deliveries.
	Record(ctx context.Context, batch []*Delivery) ([]Result, error)
	// ClaimOutcome returns the outcome recorded for a claim identity, and
	// false when the claim was never recorded (its consumer died before the
	// commit, so the message must be consumed again). msgID is the key of
	// the claimed message when its file still parses, "" otherwise: a
	// processed delivery is recorded by its processed row alone (one row a
	// message, not two), and is found through that row's key.
	ClaimOutcome(ctx context.Context, claim, msgID string) (Outcome, bool, error)
	// Close releases the ledger.
	Close() error
}

// RejectLedger is a Ledger that can say why it dead-lettered a claim.
// Recovery uses it to report a dead letter whose consumer died after
// recording it and before moving it to error/ as that consumer would have
// (the "dead letter" log line, the Observer, Config.OnDelivery and so
// --on-dead-letter): such a dead letter would otherwise reach error/
// unannounced. With a ledger that is not one, it is reported without a
// reason (a nil Result.Reject).
type RejectLedger interface {
	// ClaimReject returns the reason recorded for the dead letter of
	// claim, with its msg_id when the record has one (RejectError.MsgID),
	// and false when the claim is not recorded as one.
	ClaimReject(ctx context.Context, claim string) (*RejectError, bool, error)
}

// ErrLedgerClosed is returned by a ledger used after Close.
var ErrLedgerClosed = errors.New("ledger closed")

// Work is what a WorkLedger runs for each first delivery inside the
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

// WorkLedger is a Ledger that can run business work in the transaction
// that records a batch. Consumers with a Handler require it.
type WorkLedger interface {
	Ledger
	// RecordWork is Record with w.Handler called for every delivery that
	// inserts its processed row, inside a savepoint of the batch's
	// transaction. On success the result is OutcomeProcessed. When the
	// handler fails, the savepoint is rolled back (the processed row and
	// the handler's writes with it), the ledger counts the attempt, and
	// w.Decide says what becomes of the message: a dead letter, recorded
	// with the verdict's reason, the error as its detail and the attempts
	// made; or a retry, recorded with the attempt count and the verdict's
	// RetryAt for RetrySchedule. The result carries the verdict, the
	// attempts and the error. A verdict that is neither a dead letter with
	// a reason nor a retry with a time fails the batch.
	RecordWork(ctx context.Context, batch []*Delivery, w Work) ([]Result, error)
	// RetrySchedule returns the msg_ids waiting for a retry and when each is
	// due, so a consumer that claims one early holds it until then.
	RetrySchedule(ctx context.Context) (map[string]time.Time, error)
}
