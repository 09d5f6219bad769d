package spool

import (
	"context"
	"errors"
	"time"
)

// DefaultConcurrency is Config.Concurrency when it is zero: how many calls
// of a Caller one consumer makes at once. Small, because the downstream is
// unknown: a service sized for one client should not get 64 requests at
// once because a queue had a backlog.
const DefaultConcurrency = 4

// CallerBatchSize is Config.BatchSize when it is zero and there is a
// Caller: 4 × concurrency, at least 16 and at most DefaultBatchSize. A
// consumer with a Caller holds claimed about five batches ahead of its
// calls (the batch being claimed, one parsed, one being reserved and two
// reserved waiting for a slot), so the batch is what bounds how much of a
// backlog one consumer takes from the others. Sized by the concurrency,
// a consumer making 4 calls at once holds about 80 messages, not 1 300 it
// would take hours to call against a slow downstream, and a consumer
// started beside it finds the rest to call; at 64 calls the batch is the
// full 256 that keeps its reserves and group commits efficient. With
// Config.Ordered the default stays DefaultBatchSize: a key's messages are
// called in seq order among those claimed, and the wider window orders
// more of a backlog whose names do not sort by seq.
func CallerBatchSize(concurrency int) int {
	return min(DefaultBatchSize, max(16, 4*concurrency))
}

// Caller does the business work of one message when its effect is outside
// the ledger's database: a command, an HTTP request. It runs outside any
// ledger transaction, so a slow call holds no lock of the ledger, and up to
// Config.Concurrency calls run at once.
//
// Call is made once per first delivery of a msg_id (never for a duplicate),
// and again after a transient failure. The consumer reserves the msg_id in
// the ledger before the call, so that no two calls for one msg_id run at
// once, on any consumer of the ledger. The outcome is committed after the
// call: a consumer killed between a successful call and that commit leaves
// the message to be called again, with the same msg_id, so the effect
// should be idempotent by msg_id (handler.Post sends it as Idempotency-Key).
//
// Failures are decided as a Handler's are: Permanent dead-letters, any
// other error is retried with backoff, a panic is permanent. Call must be
// safe for concurrent use and must not modify d.
type Caller interface {
	Call(ctx context.Context, d *Delivery) error
}

// TimeoutCaller is a Caller whose calls have a bound. The consumer refuses
// a bound at or above its claim lease (ErrTimeoutBeyondLease): a claim must
// never be taken over by another host while its call may still run.
type TimeoutCaller interface {
	Caller
	CallTimeout() time.Duration
}

// CallReaper is a Caller whose calls can outlive the consumer making them
// on this host, as an Exec's processes can: a consumer killed with calls
// in flight leaves them running. Before a consumer releases the
// reservations of a dead session of this host, it calls ReapCalls, which
// kills what it can find of the session's calls. What it cannot find
// proves nothing (a process of another PID namespace, or of another
// user, is not seen): the msg_ids stay reserved until the session's
// calls lock is free (see LockingCaller) or the call bound has passed
// since the death was found, so that none is called again while its
// first call runs.
type CallReaper interface {
	Caller
	// ReapCalls kills what the calls made by session (Delivery.Consumer)
	// left running that it can find on this host. It must be safe to
	// call for a session that made no call.
	ReapCalls(session string) error
}

// LockingCaller is a Caller whose calls run as processes of this kernel
// and hold the session's calls lock, so that a consumer recovering a dead
// session can prove its calls gone, in whatever PID namespace they ran:
// each call passes the open file Delivery.CallsLock to every process
// it starts, which keep it open (inherited) for as long as they run; the
// kernel frees the lock when the last of them exits (queue.CallsLockDir).
// A consumer whose Caller holds the lock (HoldsCallsLock) takes the lock
// before its first call; without one, a dead session's msg_ids are held
// for the call bound. A process that closes the descriptor and runs on
// is not seen, and is waited for only up to the call bound.
type LockingCaller interface {
	Caller
	// HoldsCallsLock reports whether every call passes the calls lock on
	// to everything it starts: a wrapper whose calls may start processes
	// without it reports false.
	HoldsCallsLock() bool
}

// holdsCallsLock reports whether c's calls hold the calls lock.
func holdsCallsLock(c Caller) bool {
	lc, ok := c.(LockingCaller)
	return ok && lc.HoldsCallsLock()
}

// ErrTimeoutBeyondLease is returned by NewConsumer for a Caller whose
// CallTimeout is not shorter than Config.Lease.
var ErrTimeoutBeyondLease = errors.New("handler timeout at or above the claim lease")

// CallerFunc adapts a function to Caller.
type CallerFunc func(ctx context.Context, d *Delivery) error

// Call calls f.
func (f CallerFunc) Call(ctx context.Context, d *Delivery) error { return f(ctx, d) }

// callSafely runs c on d, turning a panic into a permanent *PanicError.
func callSafely(ctx context.Context, c Caller, d *Delivery) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = Permanent(&PanicError{Value: v})
		}
	}()
	return c.Call(ctx, d)
}

// reservationRecheck is how long a delivery whose msg_id another delivery
// has reserved waits, held in processing/, before it is presented to the
// ledger again.
const reservationRecheck = 50 * time.Millisecond
