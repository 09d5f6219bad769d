package e2e

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Helpers of the metrics and health tests: a process started
// with --listen 127.0.0.1:0 logs the address it bound, and the tests scrape
// it and parse what they get with Prometheus's own text parser.

// listenLine is the log record of the bound address, in the text format.
var listenLine = regexp.MustCompile(`msg=listening addr=(\S+)`)

// addrFinder is a stderr tee that hands on the first address logged.
type addrFinder struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	once sync.Once
	addr chan string
}

func (f *addrFinder) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf.Write(p)
	if m := listenLine.FindSubmatch(f.buf.Bytes()); m != nil {
		f.once.Do(func() { f.addr <- string(m[1]) })
	}
	return len(p), nil
}

// String is what the process wrote to stderr so far: safe to read while
// it runs, unlike proc.errb.
func (f *addrFinder) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.String()
}

// startListening starts spool with args (which include --listen
// 127.0.0.1:0) and returns it with the base URL of its endpoints.
func startListening(t *testing.T, args ...string) (*proc, string) {
	t.Helper()
	f := &addrFinder{addr: make(chan string, 1)}
	p := spoolAt{bin: spoolBin, tee: f}.start(t, args...)
	select {
	case addr := <-f.addr:
		return p, "http://" + addr
	case <-p.done:
		t.Fatalf("spool %q exited before listening\n%s", args, p.result())
	case <-time.After(cmdTimeout):
		t.Fatalf("spool %q logged no \"listening\" record within %v", args, cmdTimeout)
	}
	return nil, ""
}

// get fetches base+path and returns the status and the body.
func get(t *testing.T, base, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// families is one scrape, parsed.
type families map[string]*dto.MetricFamily

// scrapeMetrics fetches /metrics in the text format and parses it.
func scrapeMetrics(t *testing.T, base string) families {
	t.Helper()
	code, body := get(t, base, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return fams
}

// value is the sample of name whose labels include the pairs in labels
// (name, value, ...): a counter's or gauge's value, a histogram's count.
// ok is false when there is no such sample.
func (fs families) value(name string, labels ...string) (v float64, ok bool) {
	f := fs[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && have[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// want is one expected sample.
type want struct {
	name   string
	labels []string
	value  float64
}

// mismatches lists the samples of fs that differ from ws.
func (fs families) mismatches(ws []want) []string {
	var out []string
	for _, w := range ws {
		got, ok := fs.value(w.name, w.labels...)
		if !ok || got != w.value {
			out = append(out, w.describe(got, ok))
		}
	}
	return out
}

func (w want) describe(got float64, ok bool) string {
	name := w.name
	if len(w.labels) > 0 {
		name += "{" + strings.Join(w.labels, " ") + "}"
	}
	if !ok {
		return name + ": missing, want " + model.SampleValue(w.value).String()
	}
	return name + " = " + model.SampleValue(got).String() + ", want " + model.SampleValue(w.value).String()
}

// waitMetrics scrapes until every sample of ws holds (the queue gauges
// follow the directories at the next background listing), failing the
// test with the differences after cmdTimeout; it returns the last scrape.
func waitMetrics(t *testing.T, base string, ws []want) families {
	t.Helper()
	var fs families
	var bad []string
	if !poll(cmdTimeout, 50*time.Millisecond, func() bool {
		fs = scrapeMetrics(t, base)
		bad = fs.mismatches(ws)
		return len(bad) == 0
	}) {
		t.Fatalf("after %v the metrics still differ:\n  %s", cmdTimeout, strings.Join(bad, "\n  "))
	}
	return fs
}

// waitStatus polls base+path until it answers code, failing the test
// after cmdTimeout; it returns the last body.
func waitStatus(t *testing.T, base, path string, code int) string {
	t.Helper()
	var got int
	var body string
	if !poll(cmdTimeout, 50*time.Millisecond, func() bool {
		got, body = get(t, base, path)
		return got == code
	}) {
		t.Fatalf("%s still answers %d %q after %v, want %d", path, got, body, cmdTimeout, code)
	}
	return body
}
