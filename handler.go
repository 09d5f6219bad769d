package spool

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Handler does the business work of one message inside the ledger
// transaction that records it: its writes through tx commit together with
// the processed row, or roll back together with it. Handle is called once
// per first delivery of a msg_id (never for a duplicate) and may be called
// again for the same message after a transient failure.
//
// An error marked with Permanent dead-letters the message at once (reason
// handler); any other error is transient and the message is retried with
// backoff. A panic is a permanent failure of that message, never of the
// consumer.
type Handler interface {
	Handle(ctx context.Context, tx *sql.Tx, m *Message) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, tx *sql.Tx, m *Message) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, tx *sql.Tx, m *Message) error { return f(ctx, tx, m) }

// PermanentError marks a failure that retrying cannot fix: bad data, a
// broken business invariant.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as permanent: the message is dead-lettered at once
// with reason handler instead of being retried. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// RetryAfterError asks for the next attempt no sooner than After, as an
// HTTP Retry-After header does; the backoff delay still applies when it is
// longer.
type RetryAfterError struct {
	Err   error
	After time.Duration
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// PanicError is the failure of a handler that panicked.
type PanicError struct{ Value any }

func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// Call runs h on m, turning a panic into a permanent *PanicError so that a
// bug in one message's handling fails that message, not the consumer.
func Call(ctx context.Context, h Handler, tx *sql.Tx, m *Message) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = Permanent(&PanicError{Value: v})
		}
	}()
	return h.Handle(ctx, tx, m)
}

// Defaults of Retry.
const (
	DefaultRetryBase        = time.Second
	DefaultRetryCap         = 5 * time.Minute
	DefaultRetryMaxAttempts = 8
)

// Retry is the backoff policy for transient handler failures: exponential
// with full jitter (the delay before attempt n+1 is drawn uniformly from
// [0, min(Cap, Base*2^(n-1))]), so that many consumers failing at once do
// not retry in lockstep.
type Retry struct {
	// Base is the first delay's upper bound. Zero: DefaultRetryBase.
	Base time.Duration
	// Cap bounds every delay. Zero: DefaultRetryCap.
	Cap time.Duration
	// MaxAttempts is how many attempts a message gets in all; after the
	// last one fails it is dead-lettered as retries-exhausted.
	// Zero: DefaultRetryMaxAttempts.
	MaxAttempts int
	// NoJitter uses the upper bound itself: predictable delays, for tests
	// and for operators who want a fixed schedule.
	NoJitter bool
}

func (r Retry) withDefaults() Retry {
	if r.Base <= 0 {
		r.Base = DefaultRetryBase
	}
	if r.Cap <= 0 {
		r.Cap = DefaultRetryCap
	}
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = DefaultRetryMaxAttempts
	}
	return r
}

// Delay returns the wait after the given failed attempt (1 for the first),
// honouring a RetryAfterError in err up to Cap.
func (r Retry) Delay(attempt int, err error) time.Duration {
	r = r.withDefaults()
	bound := r.Cap
	if attempt < 62 {
		if b := r.Base << (attempt - 1); b > 0 && b < r.Cap {
			bound = b
		}
	}
	d := bound
	if !r.NoJitter {
		d = time.Duration(rand.Int64N(int64(bound) + 1))
	}
	var ra *RetryAfterError
	if errors.As(err, &ra) && ra.After > d {
		d = min(ra.After, r.Cap) // a server cannot park a message beyond the policy's cap
	}
	return d
}

// Exhausted reports whether a message that has failed attempts times may
// not be tried again.
func (r Retry) Exhausted(attempts int) bool { return attempts >= r.withDefaults().MaxAttempts }

// Work is what a ledger runs for each first delivery inside its
// transaction, and how it schedules transient failures.
type Work struct {
	Handler Handler
	Retry   Retry
}

// WorkLedger is a Ledger that can run business work in the transaction
// that records a batch. Consumers with a Handler require it.
type WorkLedger interface {
	Ledger
	// RecordWork is Record with w.Handler called for every delivery that
	// inserts its processed row, inside a savepoint of the batch's
	// transaction. On success the delivery is OutcomeProcessed. On a
	// permanent failure the savepoint is rolled back (the processed row and
	// the handler's writes with it) and the delivery is a dead letter with
	// reason handler. On a transient failure it is rolled back too, the
	// attempt is counted in the ledger, and the result is OutcomeRetry
	// with RetryAt set; when w.Retry is exhausted it becomes a dead letter
	// with reason retries-exhausted and the last error instead.
	RecordWork(ctx context.Context, batch []*Delivery, w Work) ([]Result, error)
	// RetrySchedule returns the msg_ids waiting for a retry and when each is
	// due, so a consumer that claims one early holds it until then.
	RetrySchedule(ctx context.Context) (map[string]time.Time, error)
}
