package task

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spoolq/spool/replay"
	"github.com/spoolq/spool/report"
)

// Kind is what a task does with its files.
type Kind string

const (
	// Replay moves the files back to inbox/ (package replay).
	Replay Kind = "replay"
	// Discard deletes them, or moves them to Request.To (package discard).
	Discard Kind = "discard"
)

// Selection is which dead letters a task acts on: exactly one of Names,
// Reason or All (as replay.Selection), narrowed by every filter given.
// Filters alone select among all dead letters.
type Selection struct {
	// Names are files in error/; every one must be there.
	Names []string `json:"names,omitempty"`
	// Reason is a dead-letter reason (report.ReasonUnknown for files
	// without a record).
	Reason string `json:"reason,omitempty"`
	// All is every dead letter.
	All bool `json:"all,omitempty"`
	// Since and Until keep the dead letters dead-lettered at or after
	// Since and before Until (zero for no bound); one whose time is not
	// known (no record) is left out when either is given.
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// DetailMatch is a regular expression (package regexp) the recorded
	// detail must match.
	DetailMatch string `json:"detail_match,omitempty"`
	// MsgID keeps the dead letters with this msg_id (read from the file,
	// else the ledger's record).
	MsgID string `json:"msg_id,omitempty"`
	// OrderNo keeps the dead letters with this ordering key, read from the
	// file under the queue's contract.
	OrderNo string `json:"order_no,omitempty"`
}

// Filtered reports whether s has a filter.
func (s Selection) Filtered() bool {
	return !s.Since.IsZero() || !s.Until.IsZero() || s.DetailMatch != "" || s.MsgID != "" || s.OrderNo != ""
}

// base is the replay.Selection of s: All when only filters are given.
func (s Selection) base() replay.Selection {
	b := replay.Selection{Names: s.Names, Reason: s.Reason, All: s.All}
	if len(b.Names) == 0 && b.Reason == "" && !b.All && s.Filtered() {
		b.All = true
	}
	return b
}

// ErrBadRequest is matched by every *RequestError: a caller shows it as a
// bad input (exit 2, HTTP 400).
var ErrBadRequest = errors.New("bad request")

// RequestError refuses a request that is not well formed, before anything
// is recorded or moved. Field names the part at fault as the JSON API
// names it ("to", "reason", "detail_match", "note", "by", "digest"...;
// "names" or "" for the selection or the request as a whole), and the
// message begins with that name when it is a field, so that a command
// line may put its flag in its place. It matches ErrBadRequest and the
// error it wraps (queue.ErrPathLike, replay.ErrNoSelection...).
type RequestError struct {
	Field string
	Err   error
}

func (e *RequestError) Error() string { return e.Err.Error() }

// Unwrap makes a *RequestError match ErrBadRequest and its cause.
func (e *RequestError) Unwrap() []error { return []error{ErrBadRequest, e.Err} }

// badRequest is the *RequestError of field with the message of format.
func badRequest(field, format string, args ...any) error {
	return &RequestError{Field: field, Err: fmt.Errorf(format, args...)}
}

// Check reports the first problem of s: no selection or several
// (replay.ErrNoSelection, replay.ErrManySelections), a path-like name, a
// DetailMatch that does not compile, Until not after Since, each as a
// *RequestError.
func (s Selection) Check() error {
	if err := s.base().Check(); err != nil {
		return &RequestError{Field: "names", Err: err}
	}
	if s.DetailMatch != "" {
		if _, err := regexp.Compile(s.DetailMatch); err != nil {
			return badRequest("detail_match", "detail_match %q: %w", s.DetailMatch, err)
		}
	}
	if !s.Since.IsZero() && !s.Until.IsZero() && !s.Until.After(s.Since) {
		return badRequest("until", "until %s is not after since %s", s.Until.Format(time.RFC3339), s.Since.Format(time.RFC3339))
	}
	return nil
}

// keep is the filter of s over a replay candidate; nil when s has none.
func (s Selection) keep() func(report.ReplayCandidate) bool {
	if !s.Filtered() {
		return nil
	}
	var re *regexp.Regexp
	if s.DetailMatch != "" {
		re = regexp.MustCompile(s.DetailMatch) // checked by Check
	}
	return func(c report.ReplayCandidate) bool {
		if !s.Since.IsZero() || !s.Until.IsZero() {
			if c.At.IsZero() || (!s.Since.IsZero() && c.At.Before(s.Since)) || (!s.Until.IsZero() && !c.At.Before(s.Until)) {
				return false
			}
		}
		if re != nil && !re.MatchString(c.Detail) {
			return false
		}
		if s.MsgID != "" && c.Key != s.MsgID && c.MsgID != s.MsgID {
			return false
		}
		if s.OrderNo != "" && c.OrderNo != s.OrderNo {
			return false
		}
		return true
	}
}

// Request is what is asked of a task. Force, To and Rate are always in
// its JSON, false, "" and 0 when not given, so that whoever reads a task
// (an approver above all) sees each of them.
type Request struct {
	Kind      Kind      `json:"kind"`
	Selection Selection `json:"selection"`
	// Note is why; required for a discard.
	Note string `json:"note,omitempty"`
	// Force (a replay) requeues the dead letters whose msg_id is already
	// processed, which are otherwise left out of the set (Task.Skipped).
	Force bool `json:"force"`
	// To (a discard) is an absolute directory the files are moved into
	// instead of being deleted: outside the queue, on its filesystem,
	// closed to other users and writable (queue.Dir.OpenTarget, checked
	// when the task is asked and again when it runs). The files keep their
	// inode and so their mode: what keeps them from others is the
	// directory.
	To string `json:"to"`
	// Rate is the most files moved a second; 0 for no limit. Without a
	// rate a task moves its whole set as one chunk, all or nothing; with
	// one, in chunks of about a tenth of a second's files, between which a
	// cancel is taken.
	Rate float64 `json:"rate"`
	// By names the requester in the ledger's records in place of the
	// identity's name (the command line's --by). Only the command line
	// may give it, and only without an approval policy: under one the
	// requester is the identity. The identity stays in the audit
	// (os_user). Not stored: the task's By is the requester.
	By string `json:"-"`
}

// Check reports the first problem of r as a *RequestError: an unknown
// kind, a bad selection, a discard without a note, a To that is not
// absolute or given to a replay, a Force given to a discard, a negative
// or not finite rate.
func (r Request) Check() error {
	switch r.Kind {
	case Replay, Discard:
	default:
		return badRequest("kind", "kind %q: want replay or discard", r.Kind)
	}
	if err := r.Selection.Check(); err != nil {
		return err
	}
	switch {
	case r.Kind == Discard && strings.TrimSpace(r.Note) == "":
		return badRequest("note", "note: a discard needs one: say why these dead letters go")
	case r.Kind == Replay && r.To != "":
		return badRequest("to", "to is for a discard")
	case r.Kind == Discard && r.Force:
		return badRequest("force", "force is for a replay")
	case r.To != "" && !filepath.IsAbs(r.To):
		return badRequest("to", "to %q is not an absolute path", r.To)
	case r.Rate < 0 || math.IsNaN(r.Rate) || math.IsInf(r.Rate, 0):
		return badRequest("rate", "rate %v: want files a second > 0, or 0 for no limit", r.Rate)
	}
	return nil
}
