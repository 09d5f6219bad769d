package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)

// depthReading is a reading at t of done/'s depth n, with the ledger's
// counts when read.
func depthReading(t time.Time, n float64, read bool, processed, dups, dead int64) reading {
	rd := reading{at: t}
	rd.v[depthSeries["done"]], rd.has[depthSeries["done"]] = n, true
	if read {
		rd.counts = counts{at: t, n: [3]int64{processed, dups, dead}}
	}
	return rd
}

// TestRingBounds: whatever the uptime, the hour keeps span/every points
// and the day one per 5 minutes, the newest ones, oldest first.
func TestRingBounds(t *testing.T) {
	h := newHistory(10*time.Second, t0)
	const n = 25 * 360 // 25 hours of samples
	for i := range n {
		h.record(depthReading(t0.Add(time.Duration(i)*10*time.Second), float64(i), true, int64(i), 0, 0))
	}
	hour, step := h.window(0)
	if len(hour) != 360 || step != 10*time.Second {
		t.Fatalf("the hour: %d points a %v, want 360 a 10s", len(hour), step)
	}
	if got, want := hour[0].v[depthSeries["done"]], float64(n-360); got != want {
		t.Errorf("the hour's oldest point is sample %v, want %v", got, want)
	}
	for i := 1; i < len(hour); i++ {
		if d := hour[i].first.Sub(hour[i-1].first); d != 10*time.Second {
			t.Fatalf("points %d and %d of the hour are %v apart, want 10s", i-1, i, d)
		}
	}
	day, step := h.window(1)
	if len(day) != 288 || step != 5*time.Minute {
		t.Fatalf("the day: %d points a %v, want 288 a 5m", len(day), step)
	}
	if got := day[len(day)-1].v[depthSeries["done"]]; got != n-1 {
		t.Errorf("the day's newest point holds sample %v, want the last, %d", got, n-1)
	}
	for i := 1; i < len(day); i++ {
		if d := day[i].first.Sub(day[i-1].first); d != 5*time.Minute {
			t.Fatalf("points %d and %d of the day are %v apart, want 5m", i-1, i, d)
		}
	}
	if c := cap(h.rings[0].pts); c != 360 {
		t.Errorf("the hour's ring holds %d, want 360", c)
	}
}

// TestRatesFromCounts: a rate is the difference of the ledger's counts
// over the time between two reads, per second; a sample without a read
// of the ledger waits for the next; a count that went down gives no
// rate; the day's 5-minute point holds the rate over its whole span.
func TestRatesFromCounts(t *testing.T) {
	h := newHistory(10*time.Second, t0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	h.record(depthReading(at(0), 0, true, 100, 10, 1))   // the first read: no rate
	h.record(depthReading(at(10), 0, true, 150, 10, 3))  // 5/s, 0/s, 0.2/s
	h.record(depthReading(at(20), 0, false, 0, 0, 0))    // no read: no rate
	h.record(depthReading(at(30), 0, true, 350, 30, 3))  // over 20 s: 10/s, 1/s, 0/s
	h.record(depthReading(at(40), 0, true, 300, 30, 13)) // processed went down: none; 0/s; 1/s
	ans := h.seriesOf(0, at(40))
	want := map[string][][2]float64{
		"rate.processed":    {{unixSeconds(at(10)), 5}, {unixSeconds(at(30)), 10}},
		"rate.duplicates":   {{unixSeconds(at(10)), 0}, {unixSeconds(at(30)), 1}, {unixSeconds(at(40)), 0}},
		"rate.dead_letters": {{unixSeconds(at(10)), 0.2}, {unixSeconds(at(30)), 0}, {unixSeconds(at(40)), 1}},
	}
	for _, sj := range ans.Series {
		w, ok := want[sj.Name]
		if !ok {
			continue
		}
		if sj.Unit != "per_second" || sj.Window != "1h" {
			t.Errorf("%s: unit %q window %q, want per_second 1h", sj.Name, sj.Unit, sj.Window)
		}
		if !samePoints(sj.Points, w) {
			t.Errorf("%s: %v, want %v", sj.Name, sj.Points, w)
		}
	}
	// The day's point spans the five samples: its rates are over the
	// first read to the last, 40 s.
	day, _ := h.window(1)
	if len(day) != 1 {
		t.Fatalf("the day: %d points, want 1", len(day))
	}
	if p := day[0]; !p.has[firstRate] || p.v[firstRate] != 5 || p.v[firstRate+1] != 0.5 || p.v[firstRate+2] != 0.3 {
		t.Errorf("the day's point: rates %v (has %v), want 5, 0.5 and 0.3 a second", p.v[firstRate:firstRate+3], p.has[firstRate:firstRate+3])
	}
}

func samePoints(a, b [][2]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i][0] != b[i][0] || (a[i][1]-b[i][1]) > 1e-9 || (b[i][1]-a[i][1]) > 1e-9 {
			return false
		}
	}
	return true
}

// TestRestartStartsEmpty: a new history (the server restarted) holds no
// point and says since when it keeps them, and its first read of the
// ledger gives no rate, however far the counts moved while it was down.
func TestRestartStartsEmpty(t *testing.T) {
	old := newHistory(10*time.Second, t0)
	old.record(depthReading(t0, 5, true, 100, 0, 0))
	restarted := t0.Add(time.Hour)
	h := newHistory(10*time.Second, restarted)
	ans := h.seriesOf(0, restarted)
	if ans.Since != restarted.Format(time.RFC3339Nano) && !strings.HasPrefix(ans.Since, "2026-12-05T10:00:00") {
		t.Errorf("since %q, want the restart, %v", ans.Since, restarted)
	}
	for _, sj := range ans.Series {
		if len(sj.Points) != 0 {
			t.Errorf("%s after a restart: %v, want no point", sj.Name, sj.Points)
		}
	}
	h.record(depthReading(restarted, 7, true, 900, 0, 0))
	for _, sj := range h.seriesOf(0, restarted).Series {
		switch {
		case sj.Name == "depth.done" && (len(sj.Points) != 1 || sj.Points[0][1] != 7):
			t.Errorf("done/ after the first sample: %v, want one point of 7", sj.Points)
		case strings.HasPrefix(sj.Name, "rate.") && len(sj.Points) != 0:
			t.Errorf("%s after the first sample: %v, want none (no rate across a restart)", sj.Name, sj.Points)
		}
	}
}

// TestSamplerServes: the server's sampler reads the gauges the overview
// shows and the ledger, GET series gives them per window, a window that
// is none is 400, and Close ends the sampler (under -race, a leak or a
// race shows).
func TestSamplerServes(t *testing.T) {
	s, _ := newTestConsole(t)
	age := 42.0
	s.o.Gauges = func() []StageGauge {
		return []StageGauge{{Stage: "inbox", Messages: 3, Oldest: &age}, {Stage: "done", Messages: 80}}
	}
	s.o.SampleEvery = 5 * time.Millisecond
	s.hist = newHistory(s.o.SampleEvery, time.Now())
	s.hist.factor = 1 // a read of the ledger each sample: -race makes reads slow
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	mux := http.NewServeMux()
	s.Register(mux)
	var ans SeriesAnswer
	deadline := time.Now().Add(30 * time.Second)
	for {
		get(t, mux, "/api/v1/series?window=1h", &ans)
		// Two reads of the ledger give a rate: the second comes no sooner
		// than 100 times the first took (slow under -race).
		if n := len(pointsOf(ans, "depth.done")); n >= 3 && len(pointsOf(ans, "rate.processed")) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.Close()
	closed = true
	if ans.Window != "1h" || len(ans.Series) != nSeries {
		t.Fatalf("series: window %q, %d series, want 1h and %d", ans.Window, len(ans.Series), nSeries)
	}
	for name, want := range map[string]float64{"depth.done": 80, "depth.inbox": 3, "oldest.inbox": 42} {
		ps := pointsOf(ans, name)
		if len(ps) < 3 {
			t.Fatalf("%s: %d points, want 3 at least", name, len(ps))
		}
		if ps[len(ps)-1][1] != want {
			t.Errorf("%s: last %v, want %v", name, ps[len(ps)-1][1], want)
		}
	}
	if ps := pointsOf(ans, "depth.processing"); len(ps) != 0 {
		t.Errorf("processing/, never listed: %v, want no point (not a flat zero)", ps)
	}
	if ps := pointsOf(ans, "rate.processed"); len(ps) == 0 || ps[len(ps)-1][1] != 0 {
		t.Errorf("the processed rate of an idle ledger: %v, want points of 0", ps)
	}
	// The overview's rates are the last sample's.
	var ov struct {
		Rates map[string]*float64 `json:"rates"`
	}
	get(t, mux, "/api/v1/overview", &ov)
	for _, k := range []string{"processed_per_second", "duplicates_per_second", "dead_letters_per_second", "over_seconds"} {
		if v := ov.Rates[k]; v == nil || (k != "over_seconds" && *v != 0) || (k == "over_seconds" && *v <= 0) {
			t.Errorf("overview's %s: %v, want the sampler's (0 a second on an idle ledger, over some seconds)", k, v)
		}
	}
	// Stopped: no sample is taken any more.
	before, _ := s.hist.window(0)
	time.Sleep(20 * time.Millisecond)
	after, _ := s.hist.window(0)
	if len(after) != len(before) {
		t.Errorf("after Close the history grew from %d to %d points", len(before), len(after))
	}
	for _, q := range []string{"window=7d", "window=1h&utc_offset=9999", "window=%3Cscript%3E"} {
		path := "/api/v1/series?" + q
		if strings.Contains(q, "utc_offset") {
			path = "/api/v1/charts?" + q
		}
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer v")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		var e struct{ Error string }
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != 400 || e.Error == "" || !strings.Contains(rec.Header().Get("Content-Type"), "json") {
			t.Errorf("GET %s: %d %q, want 400 with an error", path, rec.Code, rec.Body)
		}
	}
	req := httptest.NewRequest("GET", "/api/v1/series", nil)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != 401 {
		t.Errorf("GET series without a token: %d, want 401", rec.Code)
	}
}

func pointsOf(a SeriesAnswer, name string) [][2]float64 {
	for _, sj := range a.Series {
		if sj.Name == name {
			return sj.Points
		}
	}
	return nil
}

// TestSampleReadsAsTheOverview: a sample holds the gauges the overview
// shows (an inbox/ with messages but no age yet gives no age point, an
// empty one "nothing waits", 0 s) and reads the ledger again only once
// 100 times its last read has passed, as a stage is listed.
func TestSampleReadsAsTheOverview(t *testing.T) {
	s, _ := newTestConsole(t)
	gauges := []StageGauge{{Stage: "inbox", Messages: 4}, {Stage: "done", Messages: 80}}
	s.o.Gauges = func() []StageGauge { return gauges }
	ctx := context.Background()
	now := time.Now()
	s.sample(ctx, now)
	first := s.hist.counts
	if first.at.IsZero() {
		t.Fatal("the first sample did not read the ledger")
	}
	gauges[0].Messages = 0
	s.sample(ctx, now.Add(time.Nanosecond))
	if s.hist.counts != first {
		t.Errorf("a sample before 100 times the last read's time read the ledger again: %v, then %v", first, s.hist.counts)
	}
	ans := s.hist.seriesOf(0, now)
	if ps := pointsOf(ans, "oldest.inbox"); len(ps) != 1 || ps[0][1] != 0 || ps[0][0] != unixSeconds(now.Add(time.Nanosecond)) {
		t.Errorf("the inbox's age: %v, want one point, 0 s when it was empty, none when it held messages of no known age", ps)
	}
	if ps := pointsOf(ans, "depth.inbox"); len(ps) != 2 || ps[0][1] != 4 || ps[1][1] != 0 {
		t.Errorf("the inbox's depth: %v, want 4 then 0", ps)
	}
	s.hist.mu.Lock()
	s.hist.ledgerDue = time.Time{}
	s.hist.mu.Unlock()
	s.sample(ctx, now.Add(time.Second))
	if !s.hist.counts.at.After(first.at) {
		t.Error("a sample once the ledger was due did not read it")
	}
}
