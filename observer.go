package spool

import "time"

// Observer is told of a consumer's work as it happens, so that a program
// can keep metrics of it (package metrics keeps Prometheus ones) without the
// consumer knowing of any monitoring system. Every method runs on the
// consumer's own goroutines, in the middle of its pipeline: it must be quick
// and safe for concurrent use, and must not keep or modify its arguments.
//
// Embed NopObserver to implement only some methods: new methods may be
// added to Observer, and NopObserver will have them.
type Observer interface {
	// Delivered: the ledger committed what became of d, and its file has
	// reached done/ or error/ (or, for OutcomeRetry, was scheduled for a
	// retry and stays claimed).
	Delivered(d *Delivery, r Result)
	// Committed: one ledger transaction of n deliveries committed at the
	// end of took.
	Committed(n int, took time.Duration)
	// Called: one call of the business work ended. kind names the handler
	// ("exec", "post", "sql", "go"); result is "ok", "transient",
	// "permanent" or "timeout".
	Called(kind, result string, took time.Duration)
	// Recovered: n claims of dead consumers were finished or put back.
	Recovered(n int)
	// Rescanned: a watching consumer listed inbox/ in full; overflow says
	// it did so because filesystem notifications were lost.
	Rescanned(overflow bool)
}

// NopObserver is an Observer that does nothing; a Config without an
// Observer uses it.
type NopObserver struct{}

func (NopObserver) Delivered(*Delivery, Result)          {}
func (NopObserver) Committed(int, time.Duration)         {}
func (NopObserver) Called(string, string, time.Duration) {}
func (NopObserver) Recovered(int)                        {}
func (NopObserver) Rescanned(bool)                       {}
