package queueopen

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spoolq/spool/batch"
	"github.com/spoolq/spool/endpoint"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/metrics"
	"github.com/spoolq/spool/relay"
)

// RelayOptions are one run of a queue's outbox relay (Relay).
type RelayOptions struct {
	// To is the target's URL (relay.Open).
	To string
	// Relay is how the relay works; its Target, OnEvent and OnParked
	// are Relay's own.
	Relay relay.Options
	// Listen, when its Addr is set, serves the relay's metrics (the
	// outbox's rows, published and failed by target), health and
	// readiness there for the run: its Addr, TLS and Refresh are read.
	Listen endpoint.ServeOptions
	// Logger receives the endpoints' records; nil discards them.
	Logger *slog.Logger
	// Warn, when set, is told each failed publish and each parked row,
	// one line each.
	Warn func(line string)
}

// takesEvents refuses a receiving queue whose format would never take
// the relayed events: JSON messages, a file each, named as name is, on
// one line (so a JSON Lines queue that includes the name reads each as
// its one record), renamed in without a done-file. Published, they would
// wait in its inbox/ for good, marked published here.
func takesEvents(path string, f batch.Format, name string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("target dir://%s: %w: its spool.conf %s", path, relay.ErrBadTarget, fmt.Sprintf(format, args...))
	}
	switch {
	case f.Kind == batch.CSV || f.Kind == batch.XML:
		return bad("reads %s batch files, and relayed events are JSON messages, a file each (%s), which it would never take", f.Kind, name)
	case !f.Includes(name):
		return bad("takes %s, and relayed events are files named as %s", f.IncludesRule(), name)
	case f.AnnouncedBy(name) != "":
		return bad("takes a file once its done-file (%s) is there, which the relay does not write", f.DoneFile)
	}
	return nil
}

// Relay publishes the outbox of the queue at dir (its ledger opened for
// writing as lo says) to o.To until every row is published or parked, or
// with o.Relay.Watch until ctx ends, as spool relay does. A dir:// target
// receives the events in its own queue's contract (its spool.conf, read
// strictly, or the default one), and one that would dead-letter them, or
// whose format would never take them (takesEvents), is refused before
// anything is sent (relay.Dir.UseContract). Once the
// relay has run it returns what was published, failed and parked, also
// with an error; nil when it failed before.
func Relay(ctx context.Context, dir string, lo Options, o RelayOptions) (st *relay.Stats, err error) {
	lo.Use, lo.ReadOnly = Write, false
	d, l, err := openBound(ctx, dir, lo)
	if err != nil {
		return nil, err
	}
	defer closeBound(d, l, &err)
	id, err := d.ID()
	if err != nil {
		return nil, err
	}
	t, err := relay.Open(ctx, o.To)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := t.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close target: %w", cerr)
		}
	}()
	if dt, ok := t.(*relay.Dir); ok {
		c, file, err := LoadContract(dt.Path(), Override{})
		if err != nil {
			return nil, err
		}
		if err := dt.UseContract(c); err != nil {
			return nil, err
		}
		if file != nil {
			if err := takesEvents(dt.Path(), file.Format, relay.EventID(id, 1)+".json"); err != nil {
				return nil, err
			}
		}
	}
	warn := o.Warn
	if warn == nil {
		warn = func(string) {}
	}
	target := relay.Redact(o.To)
	m := metrics.New()
	m.RelayTarget(target)
	if o.Listen.Addr != "" {
		logger := o.Logger
		if logger == nil {
			logger = slog.New(slog.DiscardHandler)
		}
		ep, err := endpoint.Serve(ctx, endpoint.ServeOptions{Addr: o.Listen.Addr, TLS: o.Listen.TLS, Refresh: o.Listen.Refresh,
			Log: logger, Metrics: m, Queue: d, Ledger: l})
		if err != nil {
			return nil, err
		}
		defer func() {
			if cerr := ep.Stop(); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	ro := o.Relay
	ro.Target = target
	ro.OnEvent = func(ev *relay.Event, perr error) {
		if perr != nil {
			m.PublishFailed(target)
			warn(fmt.Sprintf("publish %s (%s of %s): %v", ev.ID, ev.Row.Type, ev.Row.Aggregate, perr))
			return
		}
		m.Published(target)
	}
	ro.OnParked = func(row *ledger.OutboxRow, reason string) {
		m.Parked(target)
		warn(fmt.Sprintf("parked outbox row %d (%s of %s): %s", row.ID, row.Type, row.Aggregate, reason))
	}
	r, err := relay.New(l, id, t, ro)
	if err != nil {
		return nil, err
	}
	run, err := r.Run(ctx)
	return &run, err
}

// Unpark puts the parked outbox rows of the queue at dir back into the
// relay's work, all of them or, when aggregate is not empty, that
// aggregate's, and returns how many (ledger.Outbox.Unpark).
func Unpark(ctx context.Context, dir string, lo Options, aggregate string) (n int64, err error) {
	lo.Use, lo.ReadOnly = Write, false
	d, l, err := openBound(ctx, dir, lo)
	if err != nil {
		return 0, err
	}
	defer closeBound(d, l, &err)
	return l.Outbox().Unpark(ctx, aggregate)
}
