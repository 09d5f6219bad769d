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
	// Batch is how many rows of an aggregate a relay publishes before it
	// marks them published and looks at the other aggregates. Zero: 64.
	Batch int
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
	// lease or a retry, looks at the outbox again. Zero: 200ms.
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
		o.Batch = 64
	}
	if o.Poll <= 0 {
		o.Poll = 200 * time.Millisecond
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	owner := fmt.Sprintf("%s-%d-%s", queue.Host(), os.Getpid(), hex.EncodeToString(rnd[:]))
	return &Relay{db: db, queueID: queueID, target: t, o: o, owner: owner}, nil
}

// Owner is the relay's name in the ledger's leases.
func (r *Relay) Owner() string { return r.owner }

// Run publishes until no row is left to publish (every row published or
// parked; it waits for rows due for a retry and for rows in another
// relay's lease), or, with Options.Watch, until ctx ends, which is then a
// clean stop (a nil error). It returns what it did. An error of the ledger ends it; a
// target's failures are recorded on their rows and do not.
func (r *Relay) Run(ctx context.Context) (Stats, error) {
	for {
		busy, waiting, err := r.round(ctx)
		if err != nil {
			if ctx.Err() != nil && r.o.Watch {
				return r.stats, nil
			}
			return r.stats, err
		}
		if busy {
			continue
		}
		if !waiting && !r.o.Watch {
			return r.stats, nil
		}
		select {
		case <-ctx.Done():
			if r.o.Watch {
				return r.stats, nil
			}
			return r.stats, ctx.Err()
		case <-time.After(r.o.Poll):
		}
	}
}

// maxHeads bounds the aggregates one round looks at.
const maxHeads = 1000

// round publishes what it can of every aggregate with work. It reports
// whether it published or parked anything (busy), and whether rows are
// left that wait: for a retry's time, or in another relay's lease.
func (r *Relay) round(ctx context.Context) (busy, waiting bool, err error) {
	heads, err := r.db.OutboxHeads(ctx, r.o.Policy == PolicySkip, maxHeads)
	if err != nil {
		return false, false, err
	}
	for _, h := range heads {
		if h.Parked {
			continue // PolicyBlock: the aggregate waits for an operator
		}
		now := time.Now()
		if h.NextAt.After(now) {
			waiting = true
			continue
		}
		held, err := r.db.AcquireLease(ctx, r.owner, h.Aggregate, now, now.Add(r.o.Lease))
		if err != nil {
			return busy, waiting, err
		}
		if !held {
			waiting = true
			continue
		}
		did, more, err := r.aggregate(ctx, h.Aggregate)
		busy = busy || did
		waiting = waiting || more
		if err != nil {
			return busy, waiting, err
		}
	}
	return busy, waiting, nil
}

// aggregate publishes up to a batch of aggregate's rows in order, under
// the lease the caller took, and releases the lease when the aggregate
// has nothing left for now. It reports whether it did anything, and
// whether the aggregate waits for a retry.
func (r *Relay) aggregate(ctx context.Context, agg string) (did, waiting bool, err error) {
	rows, err := r.db.OutboxRows(ctx, agg, r.o.Batch)
	if err != nil {
		return false, false, err
	}
	var acked []int64
	held := true
	flush := func() error {
		if len(acked) == 0 {
			return nil
		}
		now := time.Now()
		h, err := r.db.MarkPublished(ctx, r.owner, agg, acked, r.o.Target, now, now.Add(r.o.Lease))
		acked = acked[:0]
		held = h
		return err
	}
	stop := false
	for i := range rows {
		row := rows[i]
		if row.Parked {
			if r.o.Policy == PolicyBlock {
				stop = true
				break
			}
			continue
		}
		e := &Event{ID: EventID(r.queueID, row.ID), Row: row}
		perr := r.target.Publish(ctx, e)
		if r.o.OnEvent != nil {
			r.o.OnEvent(e, perr)
		}
		did = true
		if perr == nil {
			r.stats.Published++
			acked = append(acked, row.ID)
			continue
		}
		if ctx.Err() != nil {
			// Cut short by the relay's own stop: not the row's failure.
			if err := flush(); err != nil {
				return did, false, err
			}
			return did, false, ctx.Err()
		}
		r.stats.Failed++
		if err := flush(); err != nil {
			return did, false, err
		}
		parked, err := r.fail(ctx, &row, perr)
		if err != nil {
			return did, false, err
		}
		if !parked {
			waiting = true
			stop = true
			break
		}
		if r.o.Policy == PolicyBlock {
			stop = true
			break
		}
	}
	if err := flush(); err != nil {
		return did, waiting, err
	}
	if !held {
		// Another relay took the aggregate over: it goes on from here.
		return did, waiting, nil
	}
	if stop || len(rows) < r.o.Batch {
		if err := r.db.ReleaseLease(ctx, r.owner, agg); err != nil {
			return did, waiting, err
		}
	}
	return did, waiting, nil
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
		if err := r.db.Park(ctx, row.ID, reason, now); err != nil {
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
	return false, r.db.FailPublish(ctx, row.ID, perr.Error(), next)
}
