package report

import (
	"context"
	"time"

	"github.com/spoolq/spool/queue"
)

// Lag is how far a queue's consumers are behind (spool lag): its counts,
// and whether it is over its bounds. As JSON its field names are stable.
type Lag struct {
	Inbox      int `json:"inbox"`
	Processing int `json:"processing"`
	Error      int `json:"error"`
	// OldestAgeSeconds is the oldest inbox message's age, by its
	// modification time; nil when inbox/ holds none or it was not read.
	OldestAgeSeconds *float64 `json:"oldest_age_seconds"`
	Threshold        uint64   `json:"threshold"`
	// MaxAgeSeconds is the bound on that age; nil without one.
	MaxAgeSeconds *float64 `json:"max_age_seconds"`
	// Over: inbox holds more than Threshold messages, or its oldest is
	// older than the bound.
	Over bool `json:"over"`
	// Held counts held/, never counted in inbox (read when full).
	Held int `json:"held"`
	// Paused is set by the caller, who reads the ledger; nil when it
	// could not.
	Paused *bool `json:"paused"`
}

// MeasureLag counts the stages of d against threshold and, when maxAge is
// not negative, the age of inbox/'s oldest message against maxAge. Only
// names are read unless a bound on the age is given or full is set (the
// whole object: the oldest's age and the held count), which costs an
// lstat per waiting message.
func MeasureLag(ctx context.Context, d *queue.Dir, threshold uint64, maxAge time.Duration, full bool) (Lag, error) {
	var n [3]int
	for i, s := range []queue.Stage{queue.Inbox, queue.Processing, queue.Error} {
		var err error
		if n[i], err = d.Count(s); err != nil {
			return Lag{}, err
		}
	}
	ageSet := maxAge >= 0
	out := Lag{Inbox: n[0], Processing: n[1], Error: n[2], Threshold: threshold, Over: uint64(n[0]) > threshold}
	if ageSet || full {
		// Only now is a file stat'ed: the counts read names alone.
		oldest, err := OldestInbox(ctx, d)
		if err != nil {
			return out, err
		}
		if !oldest.IsZero() {
			age := max(time.Since(oldest), 0)
			secs := Seconds(age)
			out.OldestAgeSeconds = &secs
			out.Over = out.Over || ageSet && age > maxAge
		}
		if ageSet {
			secs := Seconds(maxAge)
			out.MaxAgeSeconds = &secs
		}
	}
	if full {
		var err error
		if out.Held, err = d.Count(queue.Held); err != nil {
			return out, err
		}
	}
	return out, nil
}
