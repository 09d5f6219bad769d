package spool

import "fmt"

// Reason says why a message was dead-lettered. Reasons are stable strings:
// scripts read them from `spool errors`.
type Reason string

// The reasons a message goes to error/.
const (
	// ReasonParse: not JSON, not a JSON object, invalid UTF-8, trailing data,
	// an empty file, or nesting deeper than the parser allows.
	ReasonParse Reason = "parse"
	// ReasonMissingField: a required field is absent or null.
	ReasonMissingField Reason = "missing-field"
	// ReasonInvalidField: a field has the wrong type or range, or a key
	// appears twice in one object.
	ReasonInvalidField Reason = "invalid-field"
	// ReasonNotRegular: a symlink, FIFO, device or directory named like a
	// message; it is never opened or followed.
	ReasonNotRegular Reason = "not-regular"
	// ReasonTooLarge: over the contract's size limit; never read into memory.
	ReasonTooLarge Reason = "too-large"
	// ReasonUnreadable: a regular file that could not be opened or read,
	// most often for lack of permission (EACCES); the detail names the
	// errno. Nothing is wrong with the message itself as far as anyone
	// knows: an operator fixes it (chmod, chown) and replays it.
	ReasonUnreadable Reason = "unreadable"
	// ReasonHandler: the business handler failed permanently.
	ReasonHandler Reason = "handler"
	// ReasonRetriesExhausted: the handler failed transiently on every attempt.
	ReasonRetriesExhausted Reason = "retries-exhausted"
)

// RejectError is returned for a message that can never be processed as it
// is: a poison message. The consumer dead-letters it at once and never
// retries it, so one bad file cannot block the messages behind it.
type RejectError struct {
	Reason Reason
	// Field names the offending field, when there is one.
	Field string
	// Detail is a one-line human explanation, e.g. the parser's message
	// with its byte offset.
	Detail string
	// hint is the end of Detail that guesses at the cause (a file still
	// being written), which the log repeats only once per burst
	// (Consumer.logDetail).
	hint string
	// MsgID is the message's key when the file parsed far enough to hold
	// a valid one (Contract.KeyOf), whatever else was wrong with it: a
	// missing field, another field invalid. Empty otherwise: a key that is
	// itself invalid is never recorded as one. The consumer sets it, and
	// the ledger records it with the dead letter, so that spool show finds
	// the message by it.
	MsgID string
}

func (e *RejectError) Error() string {
	switch {
	case e.Field != "" && e.Detail != "":
		return fmt.Sprintf("%s: %s: %s", e.Reason, e.Field, e.Detail)
	case e.Field != "":
		return fmt.Sprintf("%s: %s", e.Reason, e.Field)
	case e.Detail != "":
		return fmt.Sprintf("%s: %s", e.Reason, e.Detail)
	}
	return string(e.Reason)
}

func reject(reason Reason, field, format string, args ...any) *RejectError {
	return &RejectError{Reason: reason, Field: field, Detail: fmt.Sprintf(format, args...)}
}
