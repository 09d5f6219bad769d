//go:build linux

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// seriesAnswer is GET /api/v1/series.
type seriesAnswer struct {
	Window      string  `json:"window"`
	StepSeconds float64 `json:"step_seconds"`
	Since       string  `json:"since"`
	Series      []struct {
		Name   string       `json:"name"`
		Unit   string       `json:"unit"`
		Window string       `json:"window"`
		Points [][2]float64 `json:"points"`
	} `json:"series"`
}

// getSeries is GET /api/v1/series?window=w as token.
func getSeries(t *testing.T, base, token, w string) seriesAnswer {
	t.Helper()
	code, body := apiCall(t, base, token, "GET", "/api/v1/series?window="+w, "")
	if code != 200 {
		t.Fatalf("GET series?window=%s: %d %s", w, code, body)
	}
	var a seriesAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("GET series: %v\n%s", err, body)
	}
	return a
}

// last and top are the last and the highest value of series name in a;
// -1 without a point.
func (a seriesAnswer) last(name string) float64 {
	for _, s := range a.Series {
		if s.Name == name && len(s.Points) > 0 {
			return s.Points[len(s.Points)-1][1]
		}
	}
	return -1
}

func (a seriesAnswer) top(name string) float64 {
	top := -1.0
	for _, s := range a.Series {
		if s.Name == name {
			for _, p := range s.Points {
				top = math.Max(top, p[1])
			}
		}
	}
	return top
}

// shownPanel is a chart as the page shows it.
type shownPanel struct {
	Series, Unit, From, To, Last, Title string
	N, Line                             int
	Texts                               []string
}

// TestConsoleCharts: a burst of messages, duplicates and dead letters
// waits in inbox/ and is consumed while serve --auth samples; the
// overview then draws the charts, inline SVG that the page's CSP admits,
// and what each panel draws is what GET /api/v1/series gives: as many
// points over the same times, the same last value, said in its title.
// The last day's charts are a click away. A screenshot is saved.
func TestConsoleCharts(t *testing.T) {
	t.Parallel()
	alloc := browser(t)
	out := t.ArtifactDir()
	dir := t.TempDir()
	q := dir + "/q"
	mustRun(t, 0, "init", q)
	tokens := tokenFile(t, dir, "tokens", tokenLine("vic", "viewer", "vic-token"))
	// A sample a second: the last hour keeps each as a point of its own.
	srv, base := startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--auth", tokens, "--metrics-refresh", "1s")

	const processed, dups, dead = 60, 15, 12
	for i := range processed {
		putMessage(t, q, fmt.Sprintf("m-%03d.json", i), orderMessage(fmt.Sprintf("m-%03d", i), fmt.Sprintf("o-%03d", i), 1, "1.00"))
	}
	for i := range dups {
		putMessage(t, q, fmt.Sprintf("again-%03d.json", i), orderMessage(fmt.Sprintf("m-%03d", i), fmt.Sprintf("o-%03d", i), 1, "1.00"))
	}
	for i := range dead {
		putMessage(t, q, fmt.Sprintf("broken-%03d.json", i), `{"msg_id":`)
	}
	const burst = processed + dups + dead
	// The burst is seen waiting before it is consumed.
	waitFor(t, cmdTimeout, "inbox/ sampled with the burst", func() bool {
		return getSeries(t, base, "vic-token", "1h").last("depth.inbox") == burst
	})
	mustRun(t, 0, "consume", q)
	waitFor(t, cmdTimeout, "the consumed burst sampled", func() bool {
		a := getSeries(t, base, "vic-token", "1h")
		return a.last("depth.done") == processed+dups && a.last("depth.error") == dead && a.last("depth.inbox") == 0 &&
			a.top("rate.processed") > 0 && a.top("rate.dead_letters") > 0 && a.top("rate.duplicates") > 0
	})

	vic := consoleSession(t, alloc, base, "vic-token")
	waitTrue(t, vic, "the charts with the consumed burst", fmt.Sprintf(
		`!!document.querySelector('#charts svg[data-series="depth.done"][data-last="%d"]') && !!document.querySelector('#charts svg[data-series="rate.processed"][data-n]:not([data-n="0"])')`,
		processed+dups))
	// One read of every panel, in one step: the page redraws every 5 s.
	raw := eval[string](t, vic, `JSON.stringify([...document.querySelectorAll("#charts svg[data-series]")].map(s => ({
		Series: s.dataset.series, Unit: s.dataset.unit, N: +s.dataset.n, From: s.dataset.from || "", To: s.dataset.to || "",
		Last: s.dataset.last || "", Title: s.querySelector("title").textContent,
		Line: (s.querySelector("polyline") ? s.querySelector("polyline").getAttribute("points").trim().split(/\s+/).length : 0),
		Texts: [...s.querySelectorAll("text")].map(x => x.textContent) })))`)
	var shown []shownPanel
	if err := json.Unmarshal([]byte(raw), &shown); err != nil {
		t.Fatalf("the page's charts: %v\n%s", err, raw)
	}
	api := getSeries(t, base, "vic-token", "1h")
	if len(shown) != len(api.Series) || len(shown) != 9 {
		t.Fatalf("the page draws %d charts, the API has %d series, want 9", len(shown), len(api.Series))
	}
	for i, p := range shown {
		s := api.Series[i]
		if p.Series != s.Name || p.Unit != s.Unit || s.Window != "1h" {
			t.Errorf("chart %d: %s in %s, the API's %s in %s (window %s)", i, p.Series, p.Unit, s.Name, s.Unit, s.Window)
			continue
		}
		if p.N == 0 || p.Line != p.N {
			t.Errorf("%s: %d points drawn of %d, want every point of a series that has some", p.Series, p.Line, p.N)
			continue
		}
		// The page's points are the API's over the same times: the hour's
		// points, one a sample, never change once taken.
		from, err1 := strconv.ParseFloat(p.From, 64)
		to, err2 := strconv.ParseFloat(p.To, 64)
		last, err3 := strconv.ParseFloat(p.Last, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Errorf("%s: data-from %q, data-to %q, data-last %q: %v", p.Series, p.From, p.To, p.Last, err)
			continue
		}
		n, lastAt := 0, math.NaN()
		for _, pt := range s.Points {
			if pt[0] >= from && pt[0] <= to {
				n++
			}
			if pt[0] == to {
				lastAt = pt[1]
			}
		}
		if n != p.N || lastAt != last {
			t.Errorf("%s: the page draws %d points to %s ending at %s; the API has %d then, ending at %v", p.Series, p.N, p.To, p.Last, n, lastAt)
		}
		if !strings.Contains(p.Title, "now") && !strings.Contains(p.Title, "nothing waits") {
			t.Errorf("%s: title %q does not say the current value", p.Series, p.Title)
		}
		if texts := strings.Join(p.Texts, " | "); !strings.Contains(texts, "UTC") {
			t.Errorf("%s: no zone stated on its axis: %s", p.Series, texts)
		}
	}
	byName := map[string]shownPanel{}
	for _, p := range shown {
		byName[p.Series] = p
	}
	if title := byName["depth.done"].Title; !strings.Contains(title, fmt.Sprintf("%d messages now", processed+dups)) {
		t.Errorf("done/'s chart says %q, want %d messages now", title, processed+dups)
	}
	if title := byName["depth.inbox"].Title; !strings.Contains(title, fmt.Sprintf("highest %d", burst)) {
		t.Errorf("inbox/'s chart says %q, want its highest, the burst of %d", title, burst)
	}
	if title := byName["oldest.inbox"].Title; !strings.Contains(title, "nothing waits") {
		t.Errorf("the oldest age's chart says %q, want nothing waits", title)
	}
	if card := text(t, vic, "#stage-done"); strings.Contains(card, "empty") {
		t.Errorf("done/'s card with %d messages says %q", processed+dups, card)
	}
	noMissing(t, vic, "the overview with charts")
	shot(t, vic, out, "charts-1h")

	// In another zone the axes' times are that zone's, which they name.
	inTimeZone(t, vic, "Asia/Tokyo", `#charts svg[data-series="depth.done"]`)
	waitTrue(t, vic, "the charts in Tokyo's time", `document.querySelector("#charts svg .charts-head").textContent.includes("times UTC+09:00")`)
	since, err := time.Parse(time.RFC3339Nano, api.Since)
	if err != nil {
		t.Fatalf("series' since %q: %v", api.Since, err)
	}
	tokyo := time.FixedZone("UTC+09:00", 9*3600)
	head := eval[string](t, vic, `document.querySelector("#charts svg .charts-head").textContent`)
	if want := "since " + since.In(tokyo).Format("15:04"); !strings.Contains(head, want) {
		t.Errorf("the charts in Tokyo say %q, want %q (the history's start in UTC+09:00)", head, want)
	}
	labels := eval[[]string](t, vic, `[...document.querySelectorAll('#charts svg[data-series="depth.done"] text.x-label')].map(x => x.textContent)`)
	if len(labels) != 3 || labels[0] != since.In(tokyo).Format("15:04:05") {
		t.Errorf("done/'s x axis in Tokyo: %q, want 3 times from the history's start, %s", labels, since.In(tokyo).Format("15:04:05"))
	}

	do(t, vic, "the last day", chromedp.Click("#chart-window-24h"), chromedp.WaitVisible(`#charts svg[data-window="24h"]`))
	day := getSeries(t, base, "vic-token", "24h")
	if day.Window != "24h" || day.StepSeconds != 300 {
		t.Errorf("the day's series: window %q step %v s, want 24h and 300", day.Window, day.StepSeconds)
	}
	head = eval[string](t, vic, `document.querySelector("#charts svg .charts-head").textContent`)
	if !strings.Contains(head, "since") || !strings.Contains(head, "last day") {
		t.Errorf("the day's charts say %q, want since when (this serve's start) and the window", head)
	}
	if n := eval[int](t, vic, `document.querySelectorAll('#charts svg[data-series="depth.done"] polyline').length`); n != 1 {
		t.Errorf("the day's done/ chart has %d lines, want 1", n)
	}
	shot(t, vic, out, "charts-24h")

	// A restart begins an empty history, and says since when: the burst
	// is gone from the charts, not drawn as if it had never been.
	stopServe(t, srv)
	_, base = startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--auth", tokens, "--metrics-refresh", "1s")
	again := getSeries(t, base, "vic-token", "1h")
	if again.Since <= api.Since {
		t.Errorf("after a restart the history is since %s, before it since %s: want a later start", again.Since, api.Since)
	}
	if top := again.top("depth.inbox"); top >= burst {
		t.Errorf("after a restart inbox/'s chart holds %v, the burst before it", top)
	}
	code, svg := apiCall(t, base, "vic-token", "GET", "/api/v1/charts?window=1h", "")
	restarted, err := time.Parse(time.RFC3339Nano, again.Since)
	if err != nil {
		t.Fatal(err)
	}
	if want := "since " + restarted.UTC().Format("15:04") + " (this server"; code != 200 || !strings.Contains(svg, want) {
		t.Errorf("the charts after a restart: %d, want %q in\n%s", code, want, svg)
	}
}

// TestConsumeServesConsole: consume --watch --listen --auth serves the API
// and the console beside its metrics, as serve --auth does, so a queue
// with a consumer needs no second process for its charts: the series
// follow the consumer's own work, the overview page and a dead letter's
// listing answer the token, and an anonymous request is refused. --auth
// without --listen is a usage error.
func TestConsumeServesConsole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	q := dir + "/q"
	mustRun(t, 0, "init", q)
	tokens := tokenFile(t, dir, "tokens", tokenLine("vic", "viewer", "vic-token"))
	if r := run(t, "consume", q, "--auth", tokens); r.code != 2 || !strings.Contains(r.stderr, "--auth needs --listen") {
		t.Fatalf("--auth without --listen: want exit 2 naming --listen\n%s", r)
	}
	p, base := startListening(t, "consume", q, "--watch", "--listen", "127.0.0.1:0", "--auth", tokens, "--metrics-refresh", "1s")
	const processed, dead = 20, 3
	for i := range processed {
		putMessage(t, q, fmt.Sprintf("m-%03d.json", i), orderMessage(fmt.Sprintf("m-%03d", i), "o", i+1, "1.00"))
	}
	for i := range dead {
		putMessage(t, q, fmt.Sprintf("broken-%03d.json", i), `{"msg_id":`)
	}
	waitFor(t, cmdTimeout, "the consumer's work sampled", func() bool {
		a := getSeries(t, base, "vic-token", "1h")
		return a.last("depth.done") == processed && a.last("depth.error") == dead && a.top("rate.processed") > 0
	})
	if code, body := apiCall(t, base, "", "GET", "/api/v1/series?window=1h", ""); code != 401 {
		t.Errorf("GET series without a token: %d %s, want 401", code, body)
	}
	if code, body := apiCall(t, base, "vic-token", "GET", "/api/v1/dead-letters", ""); code != 200 || strings.Count(body, `"file": "broken-`) != dead {
		t.Errorf("GET dead-letters: %d %s, want the %d dead letters", code, body, dead)
	}
	if code, _ := get(t, base, "/metrics"); code != 200 {
		t.Errorf("GET /metrics beside the console: %d", code)
	}
	if st := parseStats(t, stopWatcher(t, p)); st.Processed != processed || st.DeadLetters != dead {
		t.Errorf("consume: %+v, want %d processed and %d dead letters", st, processed, dead)
	}
}
