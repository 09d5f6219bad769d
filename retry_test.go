package spool_test

import (
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool"
)

// TestRetryDecide: a permanent error is a dead letter at once, a transient
// one a retry Delay after the failure until MaxAttempts attempts have
// failed, and a Retry-After is honoured as Delay honours it.
func TestRetryDecide(t *testing.T) {
	r := spool.Retry{Base: time.Second, Cap: time.Minute, MaxAttempts: 3, NoJitter: true}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	transient := errors.New("connection reset")
	for _, tt := range []struct {
		name string
		f    spool.Failure
		want spool.Verdict
	}{
		{"permanent on the first attempt", spool.Failure{Err: spool.Permanent(transient), Attempts: 1, At: at},
			spool.Verdict{Outcome: spool.OutcomeDeadLetter, Reason: spool.ReasonHandler}},
		{"a panic", spool.Failure{Err: spool.Permanent(&spool.PanicError{Value: "nil map"}), Attempts: 2, At: at},
			spool.Verdict{Outcome: spool.OutcomeDeadLetter, Reason: spool.ReasonHandler}},
		{"transient, first attempt", spool.Failure{Err: transient, Attempts: 1, At: at},
			spool.Verdict{Outcome: spool.OutcomeRetry, RetryAt: at.Add(time.Second)}},
		{"transient, second attempt", spool.Failure{Err: transient, Attempts: 2, At: at},
			spool.Verdict{Outcome: spool.OutcomeRetry, RetryAt: at.Add(2 * time.Second)}},
		{"Retry-After", spool.Failure{Err: &spool.RetryAfterError{Err: transient, After: 30 * time.Second}, Attempts: 1, At: at},
			spool.Verdict{Outcome: spool.OutcomeRetry, RetryAt: at.Add(30 * time.Second)}},
		{"transient, last attempt", spool.Failure{Err: transient, Attempts: 3, At: at},
			spool.Verdict{Outcome: spool.OutcomeDeadLetter, Reason: spool.ReasonRetriesExhausted}},
		{"permanent on the last attempt", spool.Failure{Err: spool.Permanent(transient), Attempts: 3, At: at},
			spool.Verdict{Outcome: spool.OutcomeDeadLetter, Reason: spool.ReasonHandler}},
	} {
		if got := r.Decide(tt.f); got != tt.want {
			t.Errorf("%s: Decide = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	// The zero policy has the documented defaults.
	if v := (spool.Retry{}).Decide(spool.Failure{Err: transient, Attempts: spool.DefaultRetryMaxAttempts, At: at}); v.Reason != spool.ReasonRetriesExhausted {
		t.Errorf("zero Retry after %d attempts: %+v, want retries-exhausted", spool.DefaultRetryMaxAttempts, v)
	}
}
