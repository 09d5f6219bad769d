package console

import (
	"bytes"
	"encoding/xml"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// svgNode is an element of a parsed SVG document.
type svgNode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Text    string     `xml:",chardata"`
	Nodes   []svgNode  `xml:",any"`
}

func (n svgNode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// all is every element under n named local, n included.
func (n svgNode) all(local string) []svgNode {
	var out []svgNode
	if n.XMLName.Local == local {
		out = append(out, n)
	}
	for _, c := range n.Nodes {
		out = append(out, c.all(local)...)
	}
	return out
}

// texts is the text of every <text> under n.
func (n svgNode) texts() []string {
	var out []string
	for _, t := range n.all("text") {
		out = append(out, t.Text)
	}
	return out
}

func parseSVG(t *testing.T, b []byte) svgNode {
	t.Helper()
	var root svgNode
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	if err := d.Decode(&root); err != nil {
		t.Fatalf("the SVG does not parse as XML: %v\n%s", err, b)
	}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if cd, ok := tok.(xml.CharData); err != nil || !ok || len(bytes.TrimSpace(cd)) > 0 {
			t.Fatalf("the SVG has more after its root: %v %v", tok, err)
		}
	}
	return root
}

// panels are the root's charts by series.
func panels(root svgNode) map[string]svgNode {
	out := map[string]svgNode{}
	for _, s := range root.all("svg") {
		if name := s.attr("data-series"); name != "" {
			out[name] = s
		}
	}
	return out
}

// TestChartsSVG: the document parses as XML, holds a panel per series
// with a point of its line per point of the series, says each current
// value (done/ with 80 files is 80 messages, never "empty"), labels its
// axes with values and times in the zone asked, and draws no line where
// there is no point but says "no data yet".
func TestChartsSVG(t *testing.T) {
	since := t0
	now := t0.Add(10 * time.Minute)
	h := newHistory(10*time.Second, since)
	for i := range 12 {
		rd := depthReading(t0.Add(time.Duration(i)*10*time.Second), 80, true, int64(i*25), 0, int64(i/4))
		rd.v[depthSeries["inbox"]], rd.has[depthSeries["inbox"]] = 0, true
		rd.v[oldestSeries], rd.has[oldestSeries] = 0, true
		h.record(rd)
	}
	ans := h.seriesOf(0, now)
	loc, err := utcOffsetParam("540")
	if err != nil {
		t.Fatal(err)
	}
	b := renderCharts(ans, windows[0], since, now, loc)
	if bytes.Contains(b, []byte("<script")) || bytes.Contains(b, []byte("style=")) {
		t.Errorf("the SVG holds a script or a style attribute, which the page's CSP refuses:\n%s", b)
	}
	root := parseSVG(t, b)
	if root.XMLName.Space != "http://www.w3.org/2000/svg" || root.XMLName.Local != "svg" {
		t.Fatalf("root %v, want an svg element in the SVG namespace", root.XMLName)
	}
	ps := panels(root)
	if len(ps) != nSeries {
		t.Fatalf("%d panels, want %d", len(ps), nSeries)
	}
	head := strings.Join(root.texts(), " | ")
	if !strings.Contains(head, "since 18:00") || !strings.Contains(head, "UTC+09:00") {
		t.Errorf("the head does not say since when (18:00 in UTC+09:00):\n%s", head)
	}
	for _, sj := range ans.Series {
		p := ps[sj.Name]
		title := p.all("title")
		if len(title) != 1 {
			t.Errorf("%s: %d titles, want 1", sj.Name, len(title))
			continue
		}
		lines := p.all("polyline")
		if len(sj.Points) == 0 {
			if len(lines) != 0 || !strings.Contains(strings.Join(p.texts(), " "), "no data yet") || !strings.Contains(title[0].Text, "no data yet") {
				t.Errorf("%s without points: %d lines, texts %q, title %q; want no line and \"no data yet\"", sj.Name, len(lines), p.texts(), title[0].Text)
			}
			continue
		}
		if len(lines) != 1 {
			t.Errorf("%s: %d lines, want 1", sj.Name, len(lines))
			continue
		}
		if got := len(strings.Fields(lines[0].attr("points"))); got != len(sj.Points) {
			t.Errorf("%s: the line has %d points, the series %d", sj.Name, got, len(sj.Points))
		}
		if p.attr("data-n") != strconv.Itoa(len(sj.Points)) {
			t.Errorf("%s: data-n %q, want %d", sj.Name, p.attr("data-n"), len(sj.Points))
		}
		texts := strings.Join(p.texts(), " | ")
		if !strings.Contains(texts, "18:00") || !strings.Contains(texts, "UTC+09:00") {
			t.Errorf("%s: the x axis does not say 18:00 in UTC+09:00: %s", sj.Name, texts)
		}
	}
	// The values in words.
	for name, want := range map[string]string{
		"depth.done":        "80 messages now",
		"oldest.inbox":      "nothing waits",
		"rate.processed":    "2.5/s now",
		"rate.dead_letters": "0/s now",
		"depth.processing":  "no data yet",
	} {
		p := ps[name]
		if title := p.all("title")[0].Text; !strings.Contains(title, want) {
			t.Errorf("%s: title %q, want %q in it", name, title, want)
		}
		if texts := strings.Join(p.texts(), " | "); !strings.Contains(texts, want) {
			t.Errorf("%s: texts %q, want %q shown", name, texts, want)
		}
		if name == "depth.done" && strings.Contains(strings.Join(p.texts(), " "), "empty") {
			t.Errorf("done/ with 80 messages says empty: %q", p.texts())
		}
	}
	// The y axis of done/ goes from 0 to 100, a round top over 80.
	ys := map[string]bool{}
	for _, tx := range ps["depth.done"].all("text") {
		if tx.attr("class") == "y-label" {
			ys[tx.Text] = true
		}
	}
	if !ys["0"] || !ys["50"] || !ys["100"] {
		t.Errorf("done/'s y labels %v, want 0, 50 and 100", ys)
	}
	// The day's points hold 5 minutes of samples: a rate says it is
	// their mean, not the rate now.
	day := panels(parseSVG(t, renderCharts(h.seriesOf(1, now), windows[1], since, now, loc)))
	if title := day["rate.processed"].all("title")[0].Text; !strings.Contains(title, "(5-min mean)") {
		t.Errorf("the day's processed rate: title %q, want it said a 5-min mean", title)
	}
	if title := day["depth.done"].all("title")[0].Text; !strings.Contains(title, "80 messages now") {
		t.Errorf("the day's done/: title %q, want 80 messages now", title)
	}
	// The rates' y axis says its unit.
	for _, tx := range ps["rate.processed"].all("text") {
		if tx.attr("class") == "y-label" && !strings.HasSuffix(tx.Text, "/s") {
			t.Errorf("a y label of the processed rate is %q, want a value per second", tx.Text)
		}
	}
}

// TestChartsEndpoint: GET charts answers SVG to a viewer, with the
// server's CSP, and every panel "no data yet" before the first sample.
func TestChartsEndpoint(t *testing.T) {
	srv, _ := newTestServer(t, false)
	req := httptest.NewRequest("GET", "/api/v1/charts?window=24h&utc_offset=-300", nil)
	req.Header.Set("Authorization", "Bearer v")
	rec := httptest.NewRecorder()
	srv.Config.Handler.ServeHTTP(rec, req)
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "image/svg+xml") ||
		!strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'self'") {
		t.Fatalf("GET charts: %d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	root := parseSVG(t, rec.Body.Bytes())
	if root.attr("data-window") != "24h" {
		t.Errorf("window %q, want 24h", root.attr("data-window"))
	}
	for name, p := range panels(root) {
		if len(p.all("polyline")) != 0 || !strings.Contains(strings.Join(p.texts(), " "), "no data yet") {
			t.Errorf("%s before any sample: %q, want \"no data yet\" and no line", name, p.texts())
		}
		if !strings.Contains(strings.Join(p.texts(), " "), "UTC-05:00") {
			t.Errorf("%s: the zone asked, UTC-05:00, is not named: %q", name, p.texts())
		}
	}
}
