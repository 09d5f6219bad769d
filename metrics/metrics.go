package metrics

import (
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spoolq/spool"
)

// Metrics is spool's metrics in a registry of their own, and the Observer
// that keeps them. It is safe for concurrent use. The zero value is not
// usable: call New.
type Metrics struct {
	// NopObserver gives Metrics the Observer methods added after it.
	spool.NopObserver

	reg         *prometheus.Registry
	deliveries  *prometheus.CounterVec
	deadLetters *prometheus.CounterVec
	conflicts   prometheus.Counter
	recovered   prometheus.Counter
	handler     *prometheus.HistogramVec
	commit      prometheus.Histogram
	lastCommit  prometheus.Gauge
	rescans     prometheus.Counter
	overflows   prometheus.Counter
	absorbed    prometheus.Counter
	windowErrs  prometheus.Counter
	stages      *stageCache

	outbox                             *outboxCache
	holds                              *holdCache
	published, publishFailures, parked *prometheus.CounterVec
}

// outcomes are the values of spool_deliveries_total's outcome label, by
// the outcome they count.
var outcomes = map[spool.Outcome]string{
	spool.OutcomeProcessed:  "processed",
	spool.OutcomeDuplicate:  "duplicate",
	spool.OutcomeDeadLetter: "dead_letter",
	spool.OutcomeRetry:      "retry",
}

// reasons are the dead-letter reasons whose series exist from the start
// (at zero), so that rate() and increase() see the first dead letter of
// each; a reason not listed gets its series when it first occurs.
var reasons = []spool.Reason{
	spool.ReasonParse, spool.ReasonMissingField, spool.ReasonInvalidField, spool.ReasonNotRegular,
	spool.ReasonTooLarge, spool.ReasonUnreadable, spool.ReasonHandler, spool.ReasonRetriesExhausted,
}

// New returns the metrics, registered with a new registry together with
// the client's Go and process collectors. Counters start at zero: they
// count what this process saw, and Prometheus's rate() and increase()
// absorb restarts.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spool_deliveries_total",
			Help: "Deliveries whose outcome the ledger committed, by outcome: processed, duplicate, dead_letter, retry (a transient failure scheduled for another attempt).",
		}, []string{"outcome"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spool_dead_letters_total",
			Help: "Messages moved to error/, by the reason the ledger recorded (parse, missing-field, handler, retries-exhausted, ...).",
		}, []string{"reason"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spool_conflicts_total",
			Help: "Duplicates whose content differs from the processed message of their msg_id: a producer bug or tampering.",
		}),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spool_recovered_claims_total",
			Help: "Claims of dead consumers finished (to done/ or error/) or put back in inbox/.",
		}),
		handler: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "spool_handler_duration_seconds",
			Help:    "Duration of one call of the business work, by handler kind (exec, post, sql, go) and result (ok, transient, permanent, timeout).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"kind", "result"}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "spool_ledger_commit_duration_seconds",
			Help:    "Duration of one ledger transaction that committed deliveries, from its start to its durable commit (an in-transaction handler's work included).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		lastCommit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "spool_last_commit_timestamp_seconds",
			Help: "Unix time of the last ledger commit of deliveries by this process; 0 before the first.",
		}),
		rescans: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spool_watch_rescans_total",
			Help: "Full listings of inbox/ by a watching consumer.",
		}),
		absorbed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spool_dedup_window_absorbed_total",
			Help: "Duplicates the dedup window (--dedup) absorbed without a ledger write; they are counted in spool_deliveries_total too.",
		}),
		windowErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spool_dedup_window_errors_total",
			Help: "Requests to the dedup window (--dedup) that failed; the consumer went on with the ledger alone.",
		}),
		overflows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spool_watch_overflows_total",
			Help: "Full listings of inbox/ made because filesystem notifications were lost (the kernel's queue overflowed).",
		}),
		stages: newStageCache(),
		outbox: newOutboxCache(),
		holds:  newHoldCache(),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spool_relay_published_total",
			Help: "Outbox events the relay's target acknowledged, by target (its URL without a password).",
		}, []string{"target"}),
		publishFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spool_relay_failures_total",
			Help: "Failed publishes of outbox events, by target: each is retried after a backoff, or parks its row.",
		}, []string{"target"}),
		parked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spool_relay_parked_total",
			Help: "Outbox rows the relay parked (a permanent failure, or its attempts spent), by target.",
		}, []string{"target"}),
	}
	for _, o := range outcomes {
		m.deliveries.WithLabelValues(o)
	}
	for _, r := range reasons {
		m.deadLetters.WithLabelValues(string(r))
	}
	m.reg.MustRegister(m.deliveries, m.deadLetters, m.conflicts, m.recovered, m.handler, m.commit,
		m.lastCommit, m.rescans, m.overflows, m.absorbed, m.windowErrs, m.stages, m.outbox, m.holds, m.published, m.publishFailures, m.parked,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry holding the metrics, for a program that
// adds its own or serves them itself.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the format the scraper's Accept header
// asks for: OpenMetrics (application/openmetrics-text, ending in "# EOF")
// when it asks for it, as Prometheus does, else Prometheus's text format
// (text/plain; version=0.0.4).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// Delivered counts d's outcome, its dead letter's reason and its conflict,
// and adds its file to the cached count of the stage it reached.
func (m *Metrics) Delivered(d *spool.Delivery, r spool.Result) {
	if o, ok := outcomes[r.Outcome]; ok {
		m.deliveries.WithLabelValues(o).Inc()
	}
	switch r.Outcome {
	case spool.OutcomeDeadLetter:
		reason := "unknown"
		if r.Reject != nil && r.Reject.Reason != "" {
			reason = strings.ToValidUTF8(string(r.Reject.Reason), "?")
		}
		m.deadLetters.WithLabelValues(reason).Inc()
		m.stages.arrived(errorStage)
	case spool.OutcomeProcessed, spool.OutcomeDuplicate:
		m.stages.arrived(doneStage)
	}
	if r.Conflict {
		m.conflicts.Inc()
	}
}

// Committed observes the commit's duration and sets the last commit's time.
func (m *Metrics) Committed(n int, took time.Duration) {
	m.commit.Observe(took.Seconds())
	m.lastCommit.Set(float64(time.Now().UnixNano()) / 1e9)
}

// Called observes one call's duration by kind and result.
func (m *Metrics) Called(kind, result string, took time.Duration) {
	m.handler.WithLabelValues(kind, result).Observe(took.Seconds())
}

// Recovered counts recovered claims.
func (m *Metrics) Recovered(n int) { m.recovered.Add(float64(n)) }

// Rescanned counts a watcher's full listing of inbox/, and overflows.
func (m *Metrics) Rescanned(overflow bool) {
	m.rescans.Inc()
	if overflow {
		m.overflows.Inc()
	}
}

// WindowAbsorbed counts the duplicates the dedup window absorbed.
func (m *Metrics) WindowAbsorbed(n int) { m.absorbed.Add(float64(n)) }

// WindowFailed counts a failed request to the dedup window.
func (m *Metrics) WindowFailed() { m.windowErrs.Inc() }

// Compile-time check: Metrics is an Observer.
var _ spool.Observer = (*Metrics)(nil)
