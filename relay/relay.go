package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// Policy says what a parked row does to the rows of its aggregate after
// it.
type Policy int

const (
	// PolicyBlock: the aggregate waits behind its parked row until an
	// operator unparks it (spool relay --unpark): its order is kept.
	PolicyBlock Policy = iota
	// PolicySkip: the aggregate's later rows go on without the parked one.
	PolicySkip
)

// Options are a Relay's settings; the zero value of each field is its
// default.
type Options struct {
	// Target names the target in the outbox's target column and in
	// Stats (Redact of the URL).
	Target string
	// Lease is how long a relay holds an aggregate without renewing it;
	// another relay takes the aggregate over once it ran out. It must
	// exceed the longest publish. Zero: DefaultLease.
	Lease time.Duration
	// Batch is how many rows of an aggregate a relay reads from the
	// ledger at a time. Zero: 256.
	Batch int
	// Window is the most events in flight at once, sent and not yet
	// acknowledged, over all aggregates. Zero: the target's own
	// (Pipeline.Window) for a Pipeline, DefaultPlainWindow for a plain
	// Target, which has at most one event of an aggregate in flight.
	Window int
	// Aggregates is the most aggregates a relay works on at once (holds
	// the lease of and keeps rows of in memory). Zero: 128.
	Aggregates int
	// Policy is what a parked row does to its aggregate.
	Policy Policy
	// Retry spaces the attempts at a row whose publish failed and parks
	// the row once its MaxAttempts are spent (a permanent failure parks
	// it at once). Zero fields: spool.Retry's defaults.
	Retry spool.Retry
	// Watch keeps the relay running, waiting for new rows, until its
	// context ends; without it, Run returns once no row is left to
	// publish (every row published or parked).
	Watch bool
	// Poll is how often a watching relay, or one waiting for another's
	// lease or a retry, looks at the outbox again for aggregates to take;
	// five times that while it is busy with others and its last look
	// found none new. Zero: 200ms.
	Poll time.Duration
	// OnEvent, when set, is called after each publish attempt with the
	// event and its error (nil: acknowledged), from Run's goroutine.
	OnEvent func(e *Event, err error)
	// OnParked, when set, is called after a row was parked, with its
	// reason, from Run's goroutine.
	OnParked func(row *ledger.OutboxRow, reason string)
}

// DefaultLease is Options.Lease's default.
const DefaultLease = 30 * time.Second

// DefaultPlainWindow is Options.Window's default for a plain Target
// (dir://, http(s)://): events of that many aggregates published at once.
const DefaultPlainWindow = 8

// Stats counts what a Run did.
type Stats struct {
	// Published counts the events the target acknowledged; Failed the
	// failed attempts; Parked the rows parked.
	Published, Failed, Parked int64
}

// Relay publishes the outbox of one ledger to one target.
type Relay struct {
	db      *ledger.DB
	queueID string
	target  Target
	o       Options
	owner   string
	stats   Stats
}

// New returns a relay of db's outbox to t; queueID is the identity of the
// queue db belongs to (ledger.Bind), from which event ids are made.
func New(db *ledger.DB, queueID string, t Target, o Options) (*Relay, error) {
	if queueID == "" {
		return nil, errors.New("relay: the ledger belongs to no queue yet: its queue identity makes the event ids")
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Batch <= 0 {
		o.Batch = 256
	}
	if o.Poll <= 0 {
		o.Poll = 200 * time.Millisecond
	}
	if o.Aggregates <= 0 {
		o.Aggregates = 128
	}
	if o.Window <= 0 {
		o.Window = DefaultPlainWindow
		if p, ok := t.(Pipeline); ok {
			o.Window = max(1, p.Window())
		}
	}
	if p, ok := t.(Pipeline); ok {
		o.Window = min(o.Window, max(1, p.Window()))
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	owner := fmt.Sprintf("%s-%d-%s", queue.Host(), os.Getpid(), hex.EncodeToString(rnd[:]))
	return &Relay{db: db, queueID: queueID, target: t, o: o, owner: owner}, nil
}

// Run publishes until no row is left to publish (every row published or
// parked; it waits for rows due for a retry and for rows in another
// relay's lease), or, with Options.Watch, until ctx ends, which is then a
// clean stop (a nil error): the events in flight are waited for and the
// acknowledged ones marked. It returns what it did. An error of the
// ledger ends it; a target's failures are recorded on their rows and do
// not.
func (r *Relay) Run(ctx context.Context) (Stats, error) {
	p := newPipe(r)
	err := p.run(ctx)
	if errors.Is(err, context.Canceled) && r.o.Watch && ctx.Err() != nil {
		err = nil
	}
	return r.stats, err
}

// fail records a failed publish of row: parked when it is permanent or
// the attempts are spent, else scheduled again. It reports whether the
// row was parked.
func (r *Relay) fail(ctx context.Context, row *ledger.OutboxRow, perr error) (bool, error) {
	now := time.Now()
	v := r.o.Retry.Decide(spool.Failure{Attempts: row.Attempts + 1, Err: perr, At: now})
	if v.Outcome == spool.OutcomeDeadLetter {
		r.stats.Parked++
		reason := perr.Error()
		if !spool.IsPermanent(perr) {
			reason = fmt.Sprintf("%d attempts failed, the last: %v", row.Attempts+1, perr)
		}
		if err := r.db.Outbox().Park(ctx, row.ID, reason, now); err != nil {
			return true, err
		}
		if r.o.OnParked != nil {
			r.o.OnParked(row, reason)
		}
		return true, nil
	}
	next := v.RetryAt
	if next.IsZero() {
		next = now.Add(time.Second)
	}
	return false, r.db.Outbox().FailPublish(ctx, row.ID, perr.Error(), next)
}
