package spool

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Handler does the business work of one message inside the ledger
// transaction that records it: its writes through tx commit together with
// the processed row, or roll back together with it. Handle is called once
// per first delivery of a msg_id (never for a duplicate) and may be called
// again for the same message after a transient failure. d is the delivery
// being recorded: a valid message (d.Message is set) with its file name,
// claim and consumer; Handle must not modify it. A ledger with an outbox
// sets d.Outbox for the call: Emit(ctx, tx, d, e) writes an event through
// it, in tx.
//
// What a failure makes of the message is the consumer's decision, by its
// Retry policy (Retry.Decide): an error marked with Permanent dead-letters
// the message at once (reason handler); any other error is transient and
// the message is retried with backoff. A panic is a permanent failure of
// that message, never of the consumer.
type Handler interface {
	Handle(ctx context.Context, tx *sql.Tx, d *Delivery) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, tx *sql.Tx, d *Delivery) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, tx *sql.Tx, d *Delivery) error { return f(ctx, tx, d) }

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
	// Err is the failure itself, transient.
	Err error
	// After is the least wait before the next attempt.
	After time.Duration
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// PanicError is the failure of a handler that panicked.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// Call runs h on d, turning a panic into a permanent *PanicError so that a
// bug in one message's handling fails that message, not the consumer.
func Call(ctx context.Context, h Handler, tx *sql.Tx, d *Delivery) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = Permanent(&PanicError{Value: v})
		}
	}()
	return h.Handle(ctx, tx, d)
}
