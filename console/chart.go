package console

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The charts of the overview: GET charts draws the series of GET series
// as one SVG document, a panel per series, on the server, so that the
// page needs no chart library and nothing from another origin: it puts
// the document into the page as inline SVG (no script, no style
// attribute: the Content-Security-Policy allows neither inline). Every
// panel says what it shows in words too: a <title> with the current
// value, axes labelled with values and times, the times' zone named, and
// "no data yet" rather than a flat zero when there is nothing to draw.

// The layout, in SVG units: three panels a row.
const (
	chartCols   = 3
	panelW      = 320
	panelH      = 170
	headH       = 24
	plotLeft    = 58
	plotRight   = 14
	plotTop     = 36
	plotBottom  = 30
	plotW       = panelW - plotLeft - plotRight
	plotH       = panelH - plotTop - plotBottom
	chartWidth  = chartCols * panelW
	chartsFonts = "system-ui, sans-serif"
)

// colors of the lines, by unit and series.
var chartColors = map[string]string{
	"rate.processed": "#1a7f37", "rate.duplicates": "#9a6700", "rate.dead_letters": "#b00020",
	"oldest.inbox": "#8250df",
}

// utcOffsetParam reads utc_offset, the browser's offset from UTC in
// minutes east (540 for UTC+09:00), as the zone of the charts' times; none
// is UTC.
func utcOffsetParam(v string) (*time.Location, error) {
	if v == "" {
		return time.UTC, nil
	}
	m, err := strconv.Atoi(v)
	if err != nil || m < -14*60 || m > 14*60 {
		return nil, fmt.Errorf("utc_offset %q: want minutes east of UTC, -840 to 840 (540 for UTC+09:00)", v)
	}
	return time.FixedZone(zoneName(m), m*60), nil
}

// zoneName is "UTC" or "UTC+09:00" for an offset of m minutes east.
func zoneName(m int) string {
	if m == 0 {
		return "UTC"
	}
	sign := "+"
	if m < 0 {
		sign, m = "-", -m
	}
	return fmt.Sprintf("UTC%s%02d:%02d", sign, m/60, m%60)
}

func (s *Server) getCharts(r *request) (int, any) {
	q := r.URL.Query()
	i, err := windowParam(q.Get("window"))
	if err != nil {
		return 400, apiError("%v", err)
	}
	loc, err := utcOffsetParam(q.Get("utc_offset"))
	if err != nil {
		return 400, apiError("%v", err)
	}
	now := time.Now()
	return 200, rawBody{contentType: "image/svg+xml; charset=utf-8",
		b: renderCharts(s.hist.seriesOf(i, now), windows[i], s.hist.started, now, loc)}
}

// renderCharts draws a, window w's series at now, the history begun at
// since, with times in loc.
func renderCharts(a SeriesAnswer, w windowDef, since, now time.Time, loc *time.Location) []byte {
	var b bytes.Buffer
	rows := (len(a.Series) + chartCols - 1) / chartCols
	height := headH + rows*panelH
	from := now.Add(-w.Span)
	head := "last " + windowText(w)
	if since.After(from) {
		from = since
		head += ", since " + since.In(loc).Format("15:04") + " (this server's start: no history before)"
	}
	head += "; times " + loc.String()
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" class="charts" role="group" font-family="%s" font-size="11" data-window="%s">`,
		chartWidth, height, chartsFonts, attr(w.Name))
	b.WriteString("\n")
	fmt.Fprintf(&b, `<text x="4" y="16" class="charts-head" fill="#555">%s</text>`+"\n", text(head))
	depth := map[string]SeriesJSON{}
	for _, sj := range a.Series {
		depth[sj.Name] = sj
	}
	for k, sj := range a.Series {
		x, y := (k%chartCols)*panelW, headH+(k/chartCols)*panelH
		panel(&b, sj, depth["depth.inbox"], x, y, from, now, loc, w, meanOf(a))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// windowText names w in words: "hour", "day".
func windowText(w windowDef) string {
	if w.Span == time.Hour {
		return "hour"
	}
	return "day"
}

// panel draws one series at x, y: its name and current value, its y axis
// from 0 to a round maximum, its x axis from..to, its line and its last
// point; or, without a point, "no data yet".
func panel(b *bytes.Buffer, sj SeriesJSON, inbox SeriesJSON, x, y int, from, to time.Time, loc *time.Location, w windowDef, mean string) {
	id := "chart-" + strings.ReplaceAll(sj.Name, ".", "-")
	n := len(sj.Points)
	now := "no data yet"
	var lastT, firstT float64
	if n > 0 {
		firstT, lastT = sj.Points[0][0], sj.Points[n-1][0]
		now = valueNow(sj, inbox, mean)
	}
	title := fmt.Sprintf("%s (%s), last %s: %s", sj.Label, unitText(sj.Unit), windowText(w), now)
	top := 0.0
	for _, p := range sj.Points {
		top = max(top, p[1])
	}
	ymax := niceCeil(top, sj.Unit)
	if n > 0 {
		title += fmt.Sprintf("; highest %s, %d points from %s to %s %s", formatValue(top, sj.Unit), n,
			secondClock(firstT, loc), secondClock(lastT, loc), loc.String())
	}
	fmt.Fprintf(b, `<svg x="%d" y="%d" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-labelledby="%s-title" class="chart" id="%s" data-series="%s" data-unit="%s" data-n="%d"`,
		x, y, panelW, panelH, panelW, panelH, id, id, attr(sj.Name), attr(sj.Unit), n)
	if n > 0 {
		// Exact, as GET series gives them: a script or a test finds the
		// same points there.
		fmt.Fprintf(b, ` data-from="%s" data-to="%s" data-last="%s"`, exact(firstT), exact(lastT), exact(sj.Points[n-1][1]))
	}
	b.WriteString(">\n")
	fmt.Fprintf(b, `<title id="%s-title">%s</title>`+"\n", id, text(title))
	fmt.Fprintf(b, `<rect x="0.5" y="0.5" width="%d" height="%d" fill="#fff" stroke="#e3e6ea"/>`+"\n", panelW-1, panelH-1)
	fmt.Fprintf(b, `<text x="8" y="17" font-weight="600" fill="#1b1f24">%s</text>`+"\n", text(sj.Label+" ("+unitText(sj.Unit)+")"))
	fmt.Fprintf(b, `<text x="%d" y="17" text-anchor="end" class="chart-now" fill="#1b1f24">%s</text>`+"\n", panelW-8, text(now))
	// The axes: the plot's frame, its y labels at 0, half and the top, its
	// x labels at both ends and in the middle.
	l, r, t, bt := plotLeft, panelW-plotRight, plotTop, panelH-plotBottom
	fmt.Fprintf(b, `<path d="M%d %dV%dH%d" fill="none" stroke="#8c959f"/>`+"\n", l, t, bt, r)
	for _, f := range []float64{0, 0.5, 1} {
		yy := float64(bt) - f*float64(plotH)
		if f > 0 {
			fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%s" y2="%s" stroke="#eef0f3"/>`+"\n", l+1, r, num(yy), num(yy))
		}
		fmt.Fprintf(b, `<text x="%d" y="%s" text-anchor="end" class="y-label" fill="#555">%s</text>`+"\n",
			l-4, num(yy+4), text(formatValue(f*ymax, sj.Unit)))
	}
	t0, t1 := unixSeconds(from), unixSeconds(to)
	if t1-t0 < 1 {
		t0 = t1 - 1
	}
	tick := clock
	switch {
	case t1-t0 > 12*3600:
		tick = dayClock
	case t1-t0 < 30*60:
		tick = secondClock // minutes apart would read the same
	}
	for _, f := range []float64{0, 0.5, 1} {
		anchor := map[float64]string{0: "start", 0.5: "middle", 1: "end"}[f]
		fmt.Fprintf(b, `<text x="%s" y="%d" text-anchor="%s" class="x-label" fill="#555">%s</text>`+"\n",
			num(float64(l)+f*float64(plotW)), bt+14, anchor, text(tick(t0+f*(t1-t0), loc)))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end" fill="#888" font-size="9">%s</text>`+"\n", r, bt+26, text(loc.String()))
	if n == 0 {
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" class="no-data" fill="#555">%s</text>`+"\n",
			l+plotW/2, t+plotH/2, text("no data yet: "+whyNoData(sj)))
		b.WriteString("</svg>\n")
		return
	}
	px := func(ts float64) float64 { return float64(l) + (ts-t0)/(t1-t0)*float64(plotW) }
	py := func(v float64) float64 { return float64(bt) - v/ymax*float64(plotH) }
	color := chartColors[sj.Name]
	if color == "" {
		color = "#1f6feb"
	}
	b.WriteString(`<polyline fill="none" stroke="` + color + `" stroke-width="1.5" stroke-linejoin="round" points="`)
	for i, p := range sj.Points {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(num(px(p[0])) + "," + num(py(p[1])))
	}
	b.WriteString("\"/>\n")
	last := sj.Points[n-1]
	fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="2.5" fill="%s"/>`+"\n", num(px(last[0])), num(py(last[1])), color)
	b.WriteString("</svg>\n")
}

// valueNow says the series' last value in words, with its unit; the
// oldest age of an empty inbox/ is "nothing waits", not "0 s"; a rate of
// a point of several samples is the mean over its step (mean: "5-min").
func valueNow(sj SeriesJSON, inbox SeriesJSON, mean string) string {
	v := sj.Points[len(sj.Points)-1][1]
	if sj.Name == "oldest.inbox" && v == 0 {
		if k := len(inbox.Points); k > 0 && inbox.Points[k-1][1] == 0 {
			return "nothing waits"
		}
	}
	switch sj.Unit {
	case unitMessages:
		if v == 1 {
			return "1 message now"
		}
		return formatValue(v, sj.Unit) + " messages now"
	case unitRate:
		if mean != "" {
			return formatValue(v, sj.Unit) + " (" + mean + " mean)"
		}
	}
	return formatValue(v, sj.Unit) + " now"
}

// meanOf is how long a rate of a's points is a mean over, "5-min", when
// a point holds several samples; "" when each sample is a point.
func meanOf(a SeriesAnswer) string {
	if a.StepSeconds <= a.SampleEverySeconds {
		return ""
	}
	d := time.Duration(a.StepSeconds * float64(time.Second))
	if d%time.Minute == 0 {
		return fmt.Sprintf("%d-min", d/time.Minute)
	}
	return d.String()
}

// whyNoData says why a series has no point yet.
func whyNoData(sj SeriesJSON) string {
	if sj.Unit == unitRate {
		return "a rate needs two samples"
	}
	return "the first sample is on its way"
}

// unitText names a unit in words.
func unitText(u string) string {
	switch u {
	case unitRate:
		return "per second"
	case unitSeconds:
		return "age"
	}
	return u
}

// formatValue is v in unit u, as an axis or a title says it.
func formatValue(v float64, u string) string {
	switch u {
	case unitRate:
		return trimFloat(v) + "/s"
	case unitSeconds:
		switch {
		case v < 10:
			return trimFloat(v) + " s"
		case v < 120:
			return strconv.FormatFloat(math.Round(v), 'f', -1, 64) + " s"
		case v < 2*3600:
			return trimFloat(v/60) + " min"
		default:
			return trimFloat(v/3600) + " h"
		}
	}
	return trimFloat(v) // a count, or an axis's half-way mark (2.5)
}

// trimFloat is v with at most 3 significant digits, never in exponent
// form.
func trimFloat(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	case math.Abs(v) >= 10:
		return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// niceCeil is the least of 1, 2, 5 times a power of ten that is at least
// v (a whole number of messages: at least 1), the top of a y axis.
func niceCeil(v float64, u string) float64 {
	if v <= 0 {
		v = 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			top := m * p
			if u == unitMessages && top < 2 {
				return 2 // a half-way label of 0.5 messages says nothing true
			}
			return top
		}
	}
	return 10 * p
}

// clock is Unix time ts as HH:MM in loc.
func clock(ts float64, loc *time.Location) string {
	return time.UnixMilli(int64(ts * 1000)).In(loc).Format("15:04")
}

// secondClock is Unix time ts as HH:MM:SS in loc.
func secondClock(ts float64, loc *time.Location) string {
	return time.UnixMilli(int64(ts * 1000)).In(loc).Format("15:04:05")
}

// dayClock is Unix time ts as "Jan 2 15:04" in loc, for the day's axis.
func dayClock(ts float64, loc *time.Location) string {
	return time.UnixMilli(int64(ts * 1000)).In(loc).Format("Jan 2 15:04")
}

// num is f for an attribute, to a hundredth.
func num(f float64) string { return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64) }

// exact is f in full, as encoding/json writes it.
func exact(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// text is s escaped for an element's text.
func text(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

// attr is s escaped for an attribute's value in double quotes.
func attr(s string) string { return text(s) }
