package spool

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

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
	// WindowAbsorbed: the dedup window (Config.Window) absorbed n
	// duplicates of a batch, which the ledger was not asked about.
	WindowAbsorbed(n int)
	// WindowFailed: one request to the dedup window failed; the consumer
	// went on with the ledger alone.
	WindowFailed()
}

// NopObserver is an Observer that does nothing; a Config without an
// Observer uses it.
type NopObserver struct{}

func (NopObserver) Delivered(*Delivery, Result)          {}
func (NopObserver) Committed(int, time.Duration)         {}
func (NopObserver) Called(string, string, time.Duration) {}
func (NopObserver) Recovered(int)                        {}
func (NopObserver) Rescanned(bool)                       {}
func (NopObserver) WindowAbsorbed(int)                   {}
func (NopObserver) WindowFailed()                        {}

// Kinded is implemented by a Handler or a Caller that names its kind for
// Observer.Called, so that metrics can tell a slow command from a slow
// endpoint: handler.Exec is "exec", handler.Post "post", handler.SQL "sql".
// A handler that does not implement it is of kind "go" (a program's own).
type Kinded interface {
	Kind() string
}

// kindOf is h's Kind, or "go".
func kindOf(h any) string {
	if k, ok := h.(Kinded); ok {
		if s := k.Kind(); s != "" {
			return s
		}
	}
	return "go"
}

// callResult is the result of one call for Observer.Called: "ok",
// "permanent" (Permanent, a panic), "timeout" (a deadline or an error whose
// Timeout method says so: an exec or post timeout) or "transient".
func callResult(err error) string {
	var t interface{ Timeout() bool }
	switch {
	case err == nil:
		return "ok"
	case IsPermanent(err):
		return "permanent"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &t) && t.Timeout():
		return "timeout"
	}
	return "transient"
}

// observed is a Handler that tells the Observer of each call: the consumer
// wraps its Handler in it for Ledger.Record, whose savepoints call it.
type observed struct {
	h    Handler
	kind string
	o    Observer
}

// Handle runs the handler (a panic becomes a permanent error, as Call
// makes it) and reports its result and duration.
func (w observed) Handle(ctx context.Context, tx *sql.Tx, d *Delivery) error {
	start := time.Now()
	err := Call(ctx, w.h, tx, d)
	w.o.Called(w.kind, callResult(err), time.Since(start))
	return err
}
