package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The operator's pause and holds (spool pause, spool hold): read from the
// ledger by RefreshHolds, every second, by every process with --listen
// and a ledger (consume, serve, relay), so that a pause shows within
// about a second, as it reaches the consumers. The files held are counted
// by the stage listing, as spool_queue_messages{stage="held"}.

// HoldInterval is how often RefreshHolds reads the ledger: one row.
const HoldInterval = time.Second

// HoldState is what the pause and hold gauges show.
type HoldState struct {
	// Paused says whether the queue is paused; Holding.HeldIDs counts the msg_ids
	// held.
	Paused  bool
	HeldIDs int
}

// HoldSource reads the queue's pause and holds.
type HoldSource func(ctx context.Context) (HoldState, error)

// holdCache serves the last HoldState read, nothing before the first.
type holdCache struct {
	paused, heldIDs *prometheus.Desc

	mu    sync.Mutex
	state HoldState
	read  bool
}

func newHoldCache() *holdCache {
	return &holdCache{
		paused: prometheus.NewDesc("spool_paused",
			"1 while an operator has paused the queue (spool pause): its consumers claim and call nothing until spool resume; else 0.", nil, nil),
		heldIDs: prometheus.NewDesc("spool_held_msg_ids",
			"msg_ids an operator holds (spool hold --msg-id): their deliveries go to held/ instead of being processed.", nil, nil),
	}
}

func (c *holdCache) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.paused
	ch <- c.heldIDs
}

func (c *holdCache) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	s, read := c.state, c.read
	c.mu.Unlock()
	if !read {
		return
	}
	paused := 0.0
	if s.Paused {
		paused = 1
	}
	ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, paused)
	ch <- prometheus.MustNewConstMetric(c.heldIDs, prometheus.GaugeValue, float64(s.HeldIDs))
}

// RefreshHolds keeps the pause and hold gauges until ctx is done: it
// reads src at once, then every HoldInterval, or every hundred times its
// last read took if that is longer. A read that fails is logged at warn
// once until one succeeds again, and keeps the previous values. Run it in
// a goroutine of its own.
func (m *Metrics) RefreshHolds(ctx context.Context, src HoldSource, log *slog.Logger) {
	failing := false
	refreshLoop(ctx, HoldInterval, func(time.Time) {
		s, err := src(ctx)
		switch {
		case err == nil:
			m.holds.mu.Lock()
			m.holds.state, m.holds.read = s, true
			m.holds.mu.Unlock()
			failing = false
		case ctx.Err() != nil:
		case !failing && log != nil:
			failing = true
			log.Warn("metrics: reading the queue's pause failed; its gauges keep their last values", "err", err)
		}
	})
}

// refreshLoop calls read, given the time it starts, at once and then
// every interval, or every refreshFactor times its last call took if that
// is longer, until ctx is done: the gauges read from a ledger spend at
// most a hundredth of the time reading.
func refreshLoop(ctx context.Context, interval time.Duration, read func(start time.Time)) {
	for {
		start := time.Now()
		read(start)
		t := time.NewTimer(max(interval, refreshFactor*time.Since(start)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
