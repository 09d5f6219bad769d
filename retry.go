package spool

import (
	"errors"
	"math/rand/v2"
	"time"
)

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
	bound := backoffBound(r.Base, r.Cap, attempt-1)
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

// backoffBound is min(limit, base × 2^n) for a positive base and limit,
// computed without overflow: a shift that would pass limit is limit. A
// shifted Duration that overflowed would be negative or arbitrary, and a
// pause or delay of it none at all.
func backoffBound(base, limit time.Duration, n int) time.Duration {
	n = max(n, 0)
	if n >= 63 || base > limit>>n {
		return limit
	}
	return base << n
}

// Exhausted reports whether a message that has failed attempts times may
// not be tried again.
func (r Retry) Exhausted(attempts int) bool { return attempts >= r.withDefaults().MaxAttempts }

// Failure is one failed attempt of a handler at a message, as a Ledger's
// Record hands it to Work.Decide, and Settle to its decide.
type Failure struct {
	// Err is the handler's error; a panic is a permanent *PanicError.
	Err error
	// Attempts counts the attempts made at the message's msg_id, this one
	// included: 1 the first time it fails. The ledger keeps the count
	// across batches, runs and consumers.
	Attempts int
	// At is when the attempt failed.
	At time.Time
}

// Verdict is what becomes of a message after a failed attempt: decided by
// the consumer, recorded by the ledger.
type Verdict struct {
	// Outcome is OutcomeRetry or OutcomeDeadLetter.
	Outcome Outcome
	// Reason is a dead letter's reason: ReasonHandler or
	// ReasonRetriesExhausted. Empty for a retry.
	Reason Reason
	// RetryAt is when a retry is due. Zero for a dead letter.
	RetryAt time.Time
}

// Decide is the policy's verdict on a failure: a dead letter with reason
// handler for a permanent error, one with reason retries-exhausted once
// MaxAttempts attempts have failed, and otherwise a retry Delay after the
// failure.
func (r Retry) Decide(f Failure) Verdict {
	switch {
	case IsPermanent(f.Err):
		return Verdict{Outcome: OutcomeDeadLetter, Reason: ReasonHandler}
	case r.Exhausted(f.Attempts):
		return Verdict{Outcome: OutcomeDeadLetter, Reason: ReasonRetriesExhausted}
	}
	return Verdict{Outcome: OutcomeRetry, RetryAt: f.At.Add(r.Delay(f.Attempts, f.Err))}
}
