package spool

import (
	"context"
	"errors"
	"time"
)

// ErrLeaseLost is returned (wrapped) by a LeaseLedger's writes and renewals
// for a session whose lease another consumer took over: the session's
// claims are another's to finish now, so nothing of them may be committed
// by it any more. A consumer that meets it commits nothing more for the
// session, logs once, and goes on as a new session.
var ErrLeaseLost = errors.New("lease lost: another consumer took this session's claims over")

// LeaseState is what a LeaseLedger knows of another session's lease.
type LeaseState int

// The states of a session's lease.
const (
	// LeaseUnknown: the ledger holds no lease for the session (it never
	// took one, or it closed): its directory's lock and mtime decide.
	LeaseUnknown LeaseState = iota
	// LeaseLive: the lease has not expired by the ledger's clock.
	LeaseLive
	// LeaseTaken: the lease expired by the ledger's clock and has been
	// taken over (now or before): the session is fenced off, every write
	// of its claims is refused, and its claims may be recovered whatever
	// its lock says.
	LeaseTaken
)

// LeaseLedger is a Ledger that can hold the liveness of the consumer
// sessions sharing it, for a ledger shared by hosts: a lease row per
// session, judged by the database's own clock, so that no two hosts need
// synchronized clocks, and a fence on every write of a session's claims.
//
// After AcquireSessionLease(session), every Record, RecordWork, Reserve and
// Settle of this ledger value whose deliveries carry session as their
// Consumer checks, in its own transaction, that the session's lease was
// not taken over, and fails with ErrLeaseLost if it was: a takeover and a
// write of the session are serialised by the database, so a recovering
// consumer that took the lease over sees every outcome the session
// committed, and the session commits nothing after.
type LeaseLedger interface {
	Ledger
	// HoldsLeases reports whether the ledger's engine keeps leases: false
	// for a ledger of one host (SQLite), whose sessions are judged by
	// their directory's lock alone; the other methods are then not to be
	// called.
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
}

// leaseLedger returns l as a LeaseLedger whose engine keeps leases, or nil.
func leaseLedger(l Ledger) LeaseLedger {
	if ll, ok := l.(LeaseLedger); ok && ll.HoldsLeases() {
		return ll
	}
	return nil
}
