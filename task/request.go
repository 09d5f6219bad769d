package task

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spoolq/spool/queue"
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

// ErrBadRequest is wrapped by Request.Check, and so by Preview and
// Create, for a request that is not well formed: a caller shows it as a
// bad input (exit 2, HTTP 400).
var ErrBadRequest = errors.New("bad request")

// Check reports the first problem of s: no selection or several
// (replay.ErrNoSelection, replay.ErrManySelections), a path-like name, a
// DetailMatch that does not compile, Until not after Since. Every error
// wraps ErrBadRequest.
func (s Selection) Check() error {
	if err := s.base().Check(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if s.DetailMatch != "" {
		if _, err := regexp.Compile(s.DetailMatch); err != nil {
			return fmt.Errorf("%w: detail match: %w", ErrBadRequest, err)
		}
	}
	if !s.Since.IsZero() && !s.Until.IsZero() && !s.Until.After(s.Since) {
		return fmt.Errorf("%w: until %s is not after since %s", ErrBadRequest, s.Until.Format(time.RFC3339), s.Since.Format(time.RFC3339))
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

// Request is what is asked of a task.
type Request struct {
	Kind      Kind      `json:"kind"`
	Selection Selection `json:"selection"`
	// Note is why; required for a discard.
	Note string `json:"note,omitempty"`
	// Force (a replay) requeues the dead letters whose msg_id is already
	// processed, which are otherwise left out of the set (Task.Skipped).
	Force bool `json:"force,omitempty"`
	// To (a discard) is an absolute directory outside the queue, on its
	// filesystem, the files are moved into instead of being deleted.
	To string `json:"to,omitempty"`
	// Rate is the most files moved a second; 0 for no limit.
	Rate float64 `json:"rate,omitempty"`
}

// Check reports the first problem of r, wrapping ErrBadRequest: an
// unknown kind, a bad selection, a discard without a note, a To that is
// not absolute or given to a replay, a Force given to a discard, a
// negative or not finite rate.
func (r Request) Check() error {
	switch r.Kind {
	case Replay, Discard:
	default:
		return fmt.Errorf("%w: kind %q: want replay or discard", ErrBadRequest, r.Kind)
	}
	if err := r.Selection.Check(); err != nil {
		return err
	}
	switch {
	case r.Kind == Discard && strings.TrimSpace(r.Note) == "":
		return fmt.Errorf("%w: a discard needs a note: say why these dead letters go", ErrBadRequest)
	case r.Kind == Replay && r.To != "":
		return fmt.Errorf("%w: to is for a discard", ErrBadRequest)
	case r.Kind == Discard && r.Force:
		return fmt.Errorf("%w: force is for a replay", ErrBadRequest)
	case r.To != "" && !filepath.IsAbs(r.To):
		return fmt.Errorf("%w: to %q is not an absolute path", ErrBadRequest, r.To)
	case r.Rate < 0 || math.IsNaN(r.Rate) || math.IsInf(r.Rate, 0):
		return fmt.Errorf("%w: rate %v: want files a second > 0, or 0 for no limit", ErrBadRequest, r.Rate)
	}
	for _, n := range r.Selection.Names {
		if err := queue.CheckName(n); err != nil {
			return fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
	}
	return nil
}
