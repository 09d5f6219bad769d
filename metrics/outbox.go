package metrics

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The outbox's metrics: its gauges, read from the ledger by RefreshOutbox
// (every process with --listen and a ledger serves them: consume, serve,
// relay), and the relay's counters per target, kept by the relay that
// publishes (Published, PublishFailed, Parked).

// OutboxState is what the outbox gauges show.
type OutboxState struct {
	// Pending counts the rows not yet published and not parked; Oldest is
	// the creation time of the oldest of them, zero when there is none.
	Pending int64
	Oldest  time.Time
	// Parked counts the parked rows, not published.
	Parked int64
}

// ErrNoOutboxGauges, returned by an OutboxSource, says the ledger has no
// outbox table (a schema not migrated yet): the outbox gauges are not
// served.
var ErrNoOutboxGauges = errors.New("no outbox")

// OutboxSource reads the outbox's state.
type OutboxSource func(ctx context.Context) (OutboxState, error)

// outboxCache serves the last OutboxState read, nothing before the first.
type outboxCache struct {
	pending, oldest, parked *prometheus.Desc

	mu    sync.Mutex
	state OutboxState
	read  bool
	at    time.Time // when state was read, which oldest's age is counted to
}

func newOutboxCache() *outboxCache {
	return &outboxCache{
		pending: prometheus.NewDesc("spool_outbox_pending_rows",
			"Outbox rows waiting for the relay: not published, not parked.", nil, nil),
		oldest: prometheus.NewDesc("spool_outbox_oldest_pending_age_seconds",
			"Age of the oldest outbox row waiting for the relay, when the outbox was last read; 0 when none waits.", nil, nil),
		parked: prometheus.NewDesc("spool_outbox_parked_rows",
			"Outbox rows parked (failed for good) and not published: they wait for an operator (spool relay --unpark).", nil, nil),
	}
}

func (c *outboxCache) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.oldest
	ch <- c.parked
}

func (c *outboxCache) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	s, read, at := c.state, c.read, c.at
	c.mu.Unlock()
	if !read {
		return
	}
	age := 0.0
	if !s.Oldest.IsZero() {
		age = max(0, at.Sub(s.Oldest).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(s.Pending))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(s.Parked))
}

// RefreshOutbox keeps the outbox gauges until ctx is done: it reads src at
// once, then once every interval (zero: DefaultRefresh), or once every
// hundred times its last read took if that is longer. A read that fails
// is logged at warn and keeps the previous values; ErrNoOutboxGauges leaves the
// gauges unserved and is not logged. Run it in a goroutine of its own.
func (m *Metrics) RefreshOutbox(ctx context.Context, src OutboxSource, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		interval = DefaultRefresh
	}
	refreshLoop(ctx, interval, func(start time.Time) {
		s, err := src(ctx)
		switch {
		case err == nil:
			m.outbox.mu.Lock()
			m.outbox.state, m.outbox.read, m.outbox.at = s, true, start
			m.outbox.mu.Unlock()
		case errors.Is(err, ErrNoOutboxGauges) || ctx.Err() != nil:
		case log != nil:
			log.Warn("metrics: reading the outbox failed; its gauges keep their last values", "err", err)
		}
	})
}

// Published counts an event target acknowledged.
func (m *Metrics) Published(target string) { m.published.WithLabelValues(target).Inc() }

// PublishFailed counts a failed publish to target (the row is retried, or
// parked: Parked counts that too).
func (m *Metrics) PublishFailed(target string) { m.publishFailures.WithLabelValues(target).Inc() }

// Parked counts a row the relay to target parked.
func (m *Metrics) Parked(target string) { m.parked.WithLabelValues(target).Inc() }

// RelayTarget makes target's relay counters exist at zero, so that rate()
// and increase() see its first publish and failure.
func (m *Metrics) RelayTarget(target string) {
	m.published.WithLabelValues(target)
	m.publishFailures.WithLabelValues(target)
	m.parked.WithLabelValues(target)
}
