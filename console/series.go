package console

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/spoolq/spool/ledger"
)

// The queue's recent history, for the overview's charts and GET series:
// a sampler reads the stages' depths (the same gauges the overview
// shows) and the ledger's counts every SampleEvery, and keeps them in one
// ring of points per window, so that memory is fixed whatever the
// uptime. The history lives in the process: a restart begins an empty
// one, which the charts and the API say ("since").

// DefaultSampleEvery is the sampler's interval when Options.SampleEvery
// is zero.
const DefaultSampleEvery = 10 * time.Second

// seriesDef is one series the history keeps.
type seriesDef struct {
	// Name is its key in the API; Label names it on a chart; Unit is
	// "messages", "per_second" or "seconds".
	Name, Label, Unit string
}

// The series, in the order of a point's values: the depth of each stage,
// the rates from the ledger's counts, the inbox's oldest age.
var seriesDefs = [nSeries]seriesDef{
	{"depth.inbox", "inbox/", unitMessages},
	{"depth.processing", "processing/", unitMessages},
	{"depth.done", "done/", unitMessages},
	{"depth.error", "error/", unitMessages},
	{"depth.held", "held/", unitMessages},
	{"rate.processed", "processed", unitRate},
	{"rate.duplicates", "duplicates", unitRate},
	{"rate.dead_letters", "dead letters", unitRate},
	{"oldest.inbox", "oldest in inbox/", unitSeconds},
}

const (
	nSeries      = 9
	firstRate    = 5 // seriesDefs[firstRate:firstRate+3] are the rates
	oldestSeries = 8
	unitMessages = "messages"
	unitRate     = "per_second"
	unitSeconds  = "seconds"
)

// depthSeries is the index of a stage's depth series.
var depthSeries = map[string]int{"inbox": 0, "processing": 1, "done": 2, "error": 3, "held": 4}

// windowDef is a window the history keeps: its span, and the least time
// between two of its points (a window of a day keeps a point per 5
// minutes, not per sample).
type windowDef struct {
	Name    string
	Span    time.Duration
	MinStep time.Duration
}

// windows are the windows of GET series?window=.
var windows = []windowDef{{"1h", time.Hour, time.Second}, {"24h", 24 * time.Hour, 5 * time.Minute}}

// windowByName is the windowDef named name, and its index.
func windowByName(name string) (int, bool) {
	for i, w := range windows {
		if w.Name == name {
			return i, true
		}
	}
	return 0, false
}

// counts are the ledger's monotonic counts at an instant: processed rows,
// duplicate and dead-letter deliveries. The zero value is "not read".
type counts struct {
	at time.Time
	n  [3]int64
}

// reading is one sample: what the gauges said (has: which series they
// gave) and, when the ledger was read this time, its counts.
type reading struct {
	at     time.Time
	v      [nSeries]float64
	has    [nSeries]bool
	counts counts
}

// point is one point of a window: the readings from first to at, its
// values those of the latest reading that gave each, its rates over the
// ledger's counts from base (the last read before the point) to last.
type point struct {
	first, at  time.Time
	v          [nSeries]float64
	has        [nSeries]bool
	base, last counts
}

// merge puts rd into p.
func (p *point) merge(rd reading) {
	p.at = rd.at
	for i := range nSeries {
		if rd.has[i] && (i < firstRate || i >= firstRate+3) {
			p.v[i], p.has[i] = rd.v[i], true
		}
	}
	if rd.counts.at.IsZero() {
		return
	}
	if p.base.at.IsZero() {
		// The first read of this history: the base of the rates to come
		// (the later reads of this point, or the next point), no rate yet.
		p.base, p.last = rd.counts, rd.counts
		return
	}
	p.last = rd.counts
	dt := p.last.at.Sub(p.base.at).Seconds()
	for k := range 3 {
		d := p.last.n[k] - p.base.n[k]
		// A count that went down (prune removed rows, another ledger) says
		// nothing of the rate: no value rather than a negative one.
		p.has[firstRate+k] = d >= 0 && dt > 0
		if p.has[firstRate+k] {
			p.v[firstRate+k] = float64(d) / dt
		}
	}
}

// ring is a window's points, oldest first from head once full.
type ring struct {
	def  windowDef
	step time.Duration
	pts  []point
	head int
}

// newRing is w's ring for samples every every: a point per step (every,
// or w.MinStep if longer), span/step of them.
func newRing(w windowDef, every time.Duration) *ring {
	step := max(every, w.MinStep)
	n := int((w.Span + step - 1) / step)
	return &ring{def: w, step: step, pts: make([]point, 0, n)}
}

// add records rd, base being the ledger's counts read before it: into the
// newest point while that is younger than step, else as a new point,
// which replaces the oldest once the ring is full.
func (r *ring) add(rd reading, base counts, every time.Duration) {
	if n := len(r.pts); n > 0 && r.step > every {
		last := &r.pts[(r.head+n-1)%n]
		if rd.at.Sub(last.first) < r.step {
			last.merge(rd)
			return
		}
	}
	p := point{first: rd.at, base: base}
	p.merge(rd)
	if len(r.pts) < cap(r.pts) {
		r.pts = append(r.pts, p)
		return
	}
	r.pts[r.head] = p
	r.head = (r.head + 1) % len(r.pts)
}

// points returns a copy of the points, oldest first.
func (r *ring) points() []point {
	out := make([]point, 0, len(r.pts))
	out = append(out, r.pts[r.head:]...)
	return append(out, r.pts[:r.head]...)
}

// history is the sampler's state: a ring per window.
type history struct {
	mu      sync.Mutex
	every   time.Duration
	started time.Time
	rings   []*ring
	// counts is the ledger's last read; ledgerDue when to read it next,
	// factor times the last read's time after it (ledgerFactor).
	counts    counts
	ledgerDue time.Time
	factor    time.Duration
}

func newHistory(every time.Duration, started time.Time) *history {
	h := &history{every: every, started: started, factor: ledgerFactor}
	for _, w := range windows {
		h.rings = append(h.rings, newRing(w, every))
	}
	return h
}

// record adds rd to every window.
func (h *history) record(rd reading) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.rings {
		r.add(rd, h.counts, h.every)
	}
	if !rd.counts.at.IsZero() {
		h.counts = rd.counts
	}
}

// window returns window i's points, oldest first, and its step.
func (h *history) window(i int) ([]point, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rings[i].points(), h.rings[i].step
}

// rates are the rates of the newest point of the hour that has read the
// ledger since an earlier read, over its seconds (a nil rate: its count
// went down); ok is false before two reads.
func (h *history) rates() (v [3]*float64, over float64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rings[0]
	for i := len(r.pts) - 1; i >= 0; i-- {
		p := r.pts[(r.head+i)%len(r.pts)]
		if p.base.at.IsZero() || !p.last.at.After(p.base.at) {
			continue
		}
		for k := range 3 {
			if p.has[firstRate+k] {
				x := p.v[firstRate+k]
				v[k] = &x
			}
		}
		return v, p.last.at.Sub(p.base.at).Seconds(), true
	}
	return v, 0, false
}

// ledgerFactor bounds the time the sampler spends counting the ledger's
// rows to a hundredth, as metrics.Refresh does listing a stage: the
// ledger is read again no sooner than ledgerFactor times its last read
// took. A ledger of many millions of rows then gives rates less often,
// never a busy core.
const ledgerFactor = 100

// sample reads the gauges and, when due, the ledger's counts, as the
// overview does, and records them at now.
func (s *Server) sample(ctx context.Context, now time.Time) {
	rd := reading{at: now}
	for _, g := range s.stages() {
		i, ok := depthSeries[g.Stage]
		if !ok {
			continue
		}
		rd.v[i], rd.has[i] = float64(g.Messages), true
		switch {
		case g.Stage != "inbox":
		case g.Oldest != nil:
			rd.v[oldestSeries], rd.has[oldestSeries] = *g.Oldest, true
		case g.Messages == 0:
			// An empty inbox/ has no oldest message: nothing waits, 0 s.
			rd.v[oldestSeries], rd.has[oldestSeries] = 0, true
		}
		// Messages without an age (not yet listed with ages): no point,
		// rather than a false 0 s.
	}
	h := s.hist
	h.mu.Lock()
	due := !now.Before(h.ledgerDue)
	h.mu.Unlock()
	if due {
		start := time.Now()
		st, err := s.o.Ledger.Messages().Stats(ctx)
		took := time.Since(start)
		h.mu.Lock()
		h.ledgerDue = start.Add(h.factor * took)
		h.mu.Unlock()
		if err != nil {
			if ctx.Err() == nil {
				s.o.Log.Warn("console: the charts' sample of the ledger failed; its rates have a gap", "err", err)
			}
		} else {
			rd.counts = counts{at: now, n: [3]int64{st.Processed, st.Duplicates, st.DeadLetters}}
		}
	}
	h.record(rd)
}

// startSampler starts the sampler's goroutine, which stopSampler ends.
func (s *Server) startSampler(ctx context.Context) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopSampling != nil {
		cancel()
		return // started already
	}
	s.stopSampling = cancel
	s.sampling.Add(1)
	go func() {
		defer s.sampling.Done()
		s.runSampler(ctx)
	}()
}

// stopSampler stops the sampler and waits for its goroutine to end.
func (s *Server) stopSampler() {
	s.mu.Lock()
	stop := s.stopSampling
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	s.sampling.Wait()
}

// runSampler samples every h.every until ctx is done.
func (s *Server) runSampler(ctx context.Context) {
	t := time.NewTicker(s.hist.every)
	defer t.Stop()
	for {
		s.sample(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SeriesJSON is one series of GET series: its points [unix_seconds,
// value], oldest first, a sample's time each; a sample that gave no value
// (a stage not listed yet, the first read of the ledger for a rate, a
// count gone down) has no point.
type SeriesJSON struct {
	Name   string       `json:"name"`
	Label  string       `json:"label"`
	Unit   string       `json:"unit"`
	Window string       `json:"window"`
	Points [][2]float64 `json:"points"`
}

// SeriesAnswer is GET series: the window, its step (the least time
// between two points; a point of a step longer than the sampler's
// interval holds the latest sample of its step, and its rates the mean
// over the step so far), the sampler's interval, since (when this
// process began its history: none is kept before), at (now) and the
// series.
type SeriesAnswer struct {
	Window             string       `json:"window"`
	StepSeconds        float64      `json:"step_seconds"`
	SampleEverySeconds float64      `json:"sample_every_seconds"`
	Since              string       `json:"since"`
	At                 string       `json:"at"`
	Series             []SeriesJSON `json:"series"`
}

// seriesOf is window i of the history as the API gives it.
func (h *history) seriesOf(i int, now time.Time) SeriesAnswer {
	pts, step := h.window(i)
	name := windows[i].Name
	out := SeriesAnswer{Window: name, StepSeconds: step.Seconds(), SampleEverySeconds: h.every.Seconds(), Since: h.started.UTC().Format(ledger.TimeLayout),
		At: now.UTC().Format(ledger.TimeLayout)}
	for k, d := range seriesDefs {
		sj := SeriesJSON{Name: d.Name, Label: d.Label, Unit: d.Unit, Window: name, Points: [][2]float64{}}
		for _, p := range pts {
			if p.has[k] {
				sj.Points = append(sj.Points, [2]float64{unixSeconds(p.first), p.v[k]})
			}
		}
		out.Series = append(out.Series, sj)
	}
	return out
}

// unixSeconds is t as Unix seconds to the millisecond: two samples of
// the same second stay two times.
func unixSeconds(t time.Time) float64 { return math.Round(float64(t.UnixMilli())) / 1000 }

// windowParam reads the window parameter: 1h (the default) or 24h.
func windowParam(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	if i, ok := windowByName(v); ok {
		return i, nil
	}
	return 0, fmt.Errorf("window %q: want 1h or 24h", v)
}

func (s *Server) getSeries(r *request) (int, any) {
	i, err := windowParam(r.URL.Query().Get("window"))
	if err != nil {
		return 400, apiError("%v", err)
	}
	return 200, s.hist.seriesOf(i, time.Now())
}
