package spool

import (
	"errors"
)

// ErrLeaseLost is returned (wrapped) by a Ledger's writes and lease renewals
// for a session whose lease another consumer took over: the session's
// claims are another's to finish now, so nothing of them may be committed
// by it any more. A consumer that meets it commits nothing more for the
// session, logs once, and goes on as a new session.
var ErrLeaseLost = errors.New("lease lost: another consumer took this session's claims over")

// LeaseState is what a Ledger that HoldsLeases knows of another session's lease.
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

// leaseLedger returns l when its engine keeps leases, or nil.
func leaseLedger(l Ledger) Ledger {
	if l.HoldsLeases() {
		return l
	}
	return nil
}
