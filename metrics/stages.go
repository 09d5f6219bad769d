package metrics

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spoolq/spool/queue"
)

const (
	doneStage  = queue.Done
	errorStage = queue.Error
)

// DefaultRefresh is Refresh's interval when it is given zero: how stale
// the queue's gauges may be on a small queue.
const DefaultRefresh = 10 * time.Second

// refreshFactor bounds the time spent listing a stage to a hundredth of
// the time: a stage is listed again no sooner than refreshFactor times its
// last listing took. A done/ of a million names is then listed less often
// than every interval, at no more than 1% of a core.
const refreshFactor = 100

// aged are the stages whose oldest message's age is a metric. done/ is
// not: its listing never stats a file, which keeps it cheap; nor is held/,
// whose messages wait for an operator on purpose.
var aged = map[queue.Stage]bool{queue.Inbox: true, queue.Processing: true, queue.Error: true}

// stageState is the last listing of one stage, adjusted by the deliveries
// since.
type stageState struct {
	listed   bool
	messages int
	oldest   time.Time
	// waiting and waitingOldest are inbox/'s data files waiting for their
	// done-file (queue.StageStats.Waiting).
	waiting       int
	waitingOldest time.Time
	// notTaken counts inbox/'s entries the queue never takes
	// (queue.StageStats.NotTaken).
	notTaken int
}

// listed are the stages the gauges count: every stage, and held/ (a
// queue without one counts 0 there).
var listed = append(slices.Clone(queue.Stages), queue.Held)

// stageCache holds the queue's gauges between listings and is their
// collector: a scrape reads it and lists nothing.
type stageCache struct {
	mu       sync.Mutex
	stages   map[queue.Stage]*stageState
	messages *prometheus.Desc
	age      *prometheus.Desc
	waiting  *prometheus.Desc
	waitAge  *prometheus.Desc
	notTaken *prometheus.Desc
}

func newStageCache() *stageCache {
	c := &stageCache{
		stages: map[queue.Stage]*stageState{},
		messages: prometheus.NewDesc("spool_queue_messages",
			"Messages in each stage (inbox, processing, done, error, held), as of the last listing of the stage plus the deliveries since.",
			[]string{"stage"}, nil),
		age: prometheus.NewDesc("spool_queue_oldest_age_seconds",
			"Age of the oldest message in inbox (since its modification), processing (since its claim) and error (since its move there); 0 when the stage is empty.",
			[]string{"stage"}, nil),
		waiting: prometheus.NewDesc("spool_inbox_waiting_for_done_file",
			"Data files in inbox that wait for their done-file (a queue of batch files with done_file): not messages yet, so not in spool_queue_messages.",
			nil, nil),
		waitAge: prometheus.NewDesc("spool_inbox_waiting_for_done_file_oldest_age_seconds",
			"Age of the oldest data file waiting for its done-file, since its modification; 0 when none waits.",
			nil, nil),
		notTaken: prometheus.NewDesc("spool_inbox_not_taken",
			"Entries of inbox, not starting with '.', that the queue never takes: not named as its messages are (NAME.json, or spool.conf's include), nor done-files.",
			nil, nil),
	}
	for _, s := range listed {
		c.stages[s] = &stageState{}
	}
	return c
}

// Describe sends the gauges' descriptions.
func (c *stageCache) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.messages
	ch <- c.age
	ch <- c.waiting
	ch <- c.waitAge
	ch <- c.notTaken
}

// Collect sends the gauges of every stage listed at least once. An age is
// computed now from the oldest time listed, so it grows between listings
// as the message waits.
func (c *stageCache) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range listed {
		st := c.stages[s]
		if !st.listed {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.messages, prometheus.GaugeValue, float64(st.messages), string(s))
		if aged[s] {
			age := 0.0
			if st.messages > 0 && !st.oldest.IsZero() {
				age = max(now.Sub(st.oldest).Seconds(), 0)
			}
			ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age, string(s))
		}
		if s == queue.Inbox {
			age := 0.0
			if st.waiting > 0 {
				age = max(now.Sub(st.waitingOldest).Seconds(), 0)
			}
			ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(st.waiting))
			ch <- prometheus.MustNewConstMetric(c.waitAge, prometheus.GaugeValue, age)
			ch <- prometheus.MustNewConstMetric(c.notTaken, prometheus.GaugeValue, float64(st.notTaken))
		}
	}
}

// arrived counts a delivery's file into stage s (done/ or error/) until
// the next listing of s counts it itself.
func (c *stageCache) arrived(s queue.Stage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stages[s]
	if st.messages == 0 {
		st.oldest = time.Now()
	}
	st.messages++
}

// set records a listing of s; without ages (a count-only listing of a
// stage whose age is a metric) the oldest time is kept, or taken as now
// when the stage was empty.
func (c *stageCache) set(s queue.Stage, got queue.StageStats, ages bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stages[s]
	if !ages {
		if st.messages == 0 || st.oldest.IsZero() {
			got.Oldest = time.Now()
		} else {
			got.Oldest = st.oldest
		}
	}
	*st = stageState{listed: true, messages: got.Messages, oldest: got.Oldest, waiting: got.Waiting, waitingOldest: got.WaitingOldest,
		notTaken: got.NotTaken}
}

// listing is one kind of listing of one stage that Refresh repeats.
type listing struct {
	stage queue.Stage
	// ages: the listing stats every message for the oldest age; the
	// count-only listing of the same stage reads names alone, so that a
	// large backlog's count stays fresh while its age listing, ten times
	// dearer, waits its turn.
	ages bool
	due  time.Time
}

// Lister lists a queue's stages for Refresh: a *queue.Dir, or a
// *queue.Follow, which follows a stage replaced under its path.
type Lister interface {
	Stats(s queue.Stage, ages bool) (queue.StageStats, error)
}

// Refresh keeps the queue gauges of d until ctx is done: it lists every
// stage at once (inbox/, processing/ and error/ first, done/ last, the
// largest), then each again once every interval (zero: DefaultRefresh), or
// once every hundred times its last listing took if that is longer, so
// that listing costs at most 1% of a core whatever the queue holds. The
// stages with an age metric are also counted by names alone on the same
// rule, which keeps their counts fresh when the listing with ages is slow
// (a million messages waiting in inbox/). A listing that fails is logged
// at warn and keeps the previous values; each listing is logged at debug,
// with how long it took. Refresh returns when ctx is done; run it in a
// goroutine of its own.
func (m *Metrics) Refresh(ctx context.Context, d Lister, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		interval = DefaultRefresh
	}
	now := time.Now()
	var jobs []*listing
	for _, s := range []queue.Stage{queue.Inbox, queue.Processing, queue.Error, queue.Held, queue.Done} {
		jobs = append(jobs, &listing{stage: s, ages: aged[s], due: now})
	}
	for _, s := range []queue.Stage{queue.Inbox, queue.Processing, queue.Error} {
		// After the first listing with ages, which counts too.
		jobs = append(jobs, &listing{stage: s, due: now.Add(interval)})
	}
	for {
		for _, j := range jobs {
			if time.Now().Before(j.due) {
				continue
			}
			start := time.Now()
			got, err := d.Stats(j.stage, j.ages)
			took := time.Since(start)
			if err != nil {
				if log != nil {
					log.Warn("metrics: listing a stage failed; its gauges keep their last values", "stage", string(j.stage), "err", err)
				}
			} else {
				m.stages.set(j.stage, got, j.ages || !aged[j.stage])
				if log != nil {
					log.Debug("metrics: stage listed", "stage", string(j.stage), "ages", j.ages, "messages", got.Messages, "took", took)
				}
			}
			j.due = time.Now().Add(max(interval, refreshFactor*took))
			if ctx.Err() != nil {
				return
			}
		}
		next := jobs[0].due
		for _, j := range jobs[1:] {
			if j.due.Before(next) {
				next = j.due
			}
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// StageGauge is one stage's gauges as Metrics.Stages gives them.
type StageGauge struct {
	Stage    queue.Stage
	Messages int
	// Oldest is the age of the oldest message; HasAge is false for done/
	// (not aged) and for an empty stage.
	Oldest time.Duration
	HasAge bool
	// Waiting counts, for inbox/, the data files waiting for their
	// done-file (queue.StageStats.Waiting), and WaitingOldest is the
	// oldest one's age; 0 for the other stages.
	Waiting       int
	WaitingOldest time.Duration
	// NotTaken counts, for inbox/, the entries the queue never takes
	// (queue.StageStats.NotTaken); 0 for the other stages.
	NotTaken int
}

// Stages returns the queue gauges of every stage listed at least once, in
// queue.Stages order and held/ last, as a scrape would read them: for a
// program that shows them otherwise (spool serve's console).
func (m *Metrics) Stages() []StageGauge {
	c := m.stages
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []StageGauge
	for _, s := range listed {
		st := c.stages[s]
		if !st.listed {
			continue
		}
		g := StageGauge{Stage: s, Messages: st.messages, Waiting: st.waiting, NotTaken: st.notTaken}
		if aged[s] && st.messages > 0 && !st.oldest.IsZero() {
			g.Oldest, g.HasAge = max(now.Sub(st.oldest), 0), true
		}
		if st.waiting > 0 {
			g.WaitingOldest = max(now.Sub(st.waitingOldest), 0)
		}
		out = append(out, g)
	}
	return out
}
