package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/queue"
)

// scrape fetches /metrics from mux and parses it with Prometheus's text
// parser.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept", "text/plain")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value is the value of the family's sample whose labels include want
// (name=value pairs), and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, want ...string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(want); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == want[i] && l.GetValue() == want[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
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

// TestObserverMetrics: each Observer call moves its metric, with the
// names and labels the operations docs and the alert rules use.
func TestObserverMetrics(t *testing.T) {
	m := New()
	d := &spool.Delivery{}
	m.Delivered(d, spool.Result{Outcome: spool.OutcomeProcessed})
	m.Delivered(d, spool.Result{Outcome: spool.OutcomeDuplicate, Conflict: true})
	m.Delivered(d, spool.Result{Outcome: spool.OutcomeDuplicate})
	m.Delivered(d, spool.Result{Outcome: spool.OutcomeDeadLetter, Reject: &spool.RejectError{Reason: spool.ReasonParse}})
	m.Delivered(d, spool.Result{Outcome: spool.OutcomeRetry})
	m.Committed(3, 2*time.Millisecond)
	m.Called("exec", "timeout", time.Second)
	m.Recovered(2)
	m.Rescanned(false)
	m.Rescanned(true)
	m.WindowAbsorbed(5)
	m.WindowFailed()
	fams := scrape(t, m.Handler())
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"spool_deliveries_total", []string{"outcome", "processed"}, 1},
		{"spool_deliveries_total", []string{"outcome", "duplicate"}, 2},
		{"spool_deliveries_total", []string{"outcome", "dead_letter"}, 1},
		{"spool_deliveries_total", []string{"outcome", "retry"}, 1},
		{"spool_dead_letters_total", []string{"reason", "parse"}, 1},
		{"spool_dead_letters_total", []string{"reason", "handler"}, 0},
		{"spool_conflicts_total", nil, 1},
		{"spool_recovered_claims_total", nil, 2},
		{"spool_handler_duration_seconds", []string{"kind", "exec", "result", "timeout"}, 1},
		{"spool_ledger_commit_duration_seconds", nil, 1},
		{"spool_watch_rescans_total", nil, 2},
		{"spool_watch_overflows_total", nil, 1},
		{"spool_dedup_window_absorbed_total", nil, 5},
		{"spool_dedup_window_errors_total", nil, 1},
	} {
		if got, ok := value(fams, c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if ts, _ := value(fams, "spool_last_commit_timestamp_seconds"); time.Since(time.Unix(int64(ts), 0)) > time.Minute {
		t.Errorf("spool_last_commit_timestamp_seconds = %v, want about now", ts)
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("%s missing: the Go and process collectors are not registered", name)
		}
	}
}

func newQueue(t *testing.T) *queue.Dir {
	t.Helper()
	root := filepath.Join(t.TempDir(), "q")
	if err := queue.Init(root); err != nil {
		t.Fatal(err)
	}
	d, err := queue.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func put(t *testing.T, d *queue.Dir, s queue.Stage, name string, mtime time.Time) {
	t.Helper()
	p := filepath.Join(d.StagePath(s), name)
	if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// refreshListed runs m.Refresh of d (an hour between listings) until the
// returned stop is called, once a scrape shows the series of metric
// with labels: the first listing is done.
func refreshListed(t *testing.T, m *Metrics, d *queue.Dir, metric string, labels ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Refresh(ctx, d, time.Hour, nil) }()
	stop = func() { cancel(); <-done }
	deadline := time.Now().Add(time.Minute)
	for {
		if _, ok := value(scrape(t, m.Handler()), metric, labels...); ok {
			return stop
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatal("Refresh listed nothing within a minute")
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

// TestRefresh: the queue gauges come from Refresh's listings, not from the
// scrape: files added after a listing are not seen until the next one,
// while a delivery counts into done/ at once.
func TestRefresh(t *testing.T) {
	d := newQueue(t)
	hour := time.Now().Add(-time.Hour)
	put(t, d, queue.Inbox, "a.json", hour)
	put(t, d, queue.Inbox, "b.json", time.Now())
	put(t, d, queue.Done, "c.json", hour)
	m := New()
	if _, ok := value(scrape(t, m.Handler()), "spool_queue_messages", "stage", "inbox"); ok {
		t.Error("spool_queue_messages before any listing: want no sample rather than a false 0")
	}
	defer refreshListed(t, m, d, "spool_queue_messages", "stage", "done")()
	put(t, d, queue.Inbox, "late.json", time.Now()) // after the listing: the next is an hour away
	m.Delivered(&spool.Delivery{}, spool.Result{Outcome: spool.OutcomeProcessed})
	fams := scrape(t, m.Handler())
	for stage, want := range map[string]float64{"inbox": 2, "processing": 0, "done": 2, "error": 0} {
		if got, _ := value(fams, "spool_queue_messages", "stage", stage); got != want {
			t.Errorf("spool_queue_messages{stage=%q} = %v, want %v", stage, got, want)
		}
	}
	if age, _ := value(fams, "spool_queue_oldest_age_seconds", "stage", "inbox"); age < 3500 || age > 3700 {
		t.Errorf("inbox oldest age = %v s, want about an hour", age)
	}
	if _, ok := value(fams, "spool_queue_oldest_age_seconds", "stage", "done"); ok {
		t.Error("an oldest age for done/: its listing must not stat files")
	}
}

// TestRefreshWaiting: a data file of inbox/ that waits for its done-file
// (the Dir's message rule says so) is no message, and its own gauges
// count it with its age; a file the queue never takes is counted apart.
func TestRefreshWaiting(t *testing.T) {
	d := newQueue(t)
	inbox := d.StagePath(queue.Inbox)
	d.SetMessageNames(func(s queue.Stage, name string) bool {
		if !strings.HasSuffix(name, ".csv") {
			return false
		}
		_, err := os.Lstat(filepath.Join(inbox, name+".done"))
		return s != queue.Inbox || err == nil
	}, "*.csv, once {name}.done is there")
	hour := time.Now().Add(-time.Hour)
	put(t, d, queue.Inbox, "ready.csv", time.Now())
	put(t, d, queue.Inbox, "ready.csv.done", time.Now())
	put(t, d, queue.Inbox, "old.csv", hour)
	put(t, d, queue.Inbox, "new.csv", time.Now())
	d.SetDoneFiles(func(name string) (bool, bool) {
		data, ok := strings.CutSuffix(name, ".done")
		if !ok {
			return false, false
		}
		_, err := os.Lstat(filepath.Join(inbox, data))
		return true, err != nil
	})
	put(t, d, queue.Inbox, "stray.csv.done", time.Now())
	put(t, d, queue.Inbox, "orders.csv.gz", time.Now())
	put(t, d, queue.Inbox, ".orders.csv.tmp", time.Now())
	m := New()
	defer refreshListed(t, m, d, "spool_inbox_waiting_for_done_file")()
	fams := scrape(t, m.Handler())
	if got, _ := value(fams, "spool_queue_messages", "stage", "inbox"); got != 1 {
		t.Errorf("spool_queue_messages{stage=inbox} = %v, want the ready file alone", got)
	}
	if got, _ := value(fams, "spool_inbox_waiting_for_done_file"); got != 2 {
		t.Errorf("spool_inbox_waiting_for_done_file = %v, want 2", got)
	}
	if age, _ := value(fams, "spool_inbox_waiting_for_done_file_oldest_age_seconds"); age < 3500 || age > 3700 {
		t.Errorf("oldest waiting age = %v s, want about an hour", age)
	}
	if got, _ := value(fams, "spool_inbox_not_taken"); got != 1 {
		t.Errorf("spool_inbox_not_taken = %v, want orders.csv.gz alone (not the done-files, not the temp file)", got)
	}
}

// TestReady: /readyz fails while a stage cannot take a file (replaced by
// a file; immutable, which stops root too) and passes again after.
func TestReady(t *testing.T) {
	d := newQueue(t)
	mux := Mux(New(), Ready{Dir: d})
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/readyz"); code != 200 {
		t.Fatalf("/readyz of a sound queue: %d %s", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	errDir := d.StagePath(queue.Error)
	if err := os.Rename(errDir, errDir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(errDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "stage error") {
		t.Errorf("/readyz with error/ replaced by a file: %d %q, want 503 naming the stage", code, body)
	}
	if err := errors.Join(os.Remove(errDir), os.Rename(errDir+".away", errDir)); err != nil {
		t.Fatal(err)
	}
	if code, body := get("/readyz"); code != 200 {
		t.Fatalf("/readyz after error/ came back: %d %s", code, body)
	}
	inbox := d.StagePath(queue.Inbox)
	if out, err := exec.Command("chattr", "+i", inbox).CombinedOutput(); err != nil {
		t.Skipf("chattr +i is not available here (%v: %s); the immutable case is not checked", err, out)
	}
	defer exec.Command("chattr", "-i", inbox).Run()
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "stage inbox") {
		t.Errorf("/readyz with an immutable inbox/: %d %q, want 503 naming the stage", code, body)
	}
	if out, err := exec.Command("chattr", "-i", inbox).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v: %s", err, out)
	}
	if code, body := get("/readyz"); code != 200 {
		t.Fatalf("/readyz after chattr -i: %d %s", code, body)
	}
}

// BenchmarkScrape is one scrape of /metrics as Prometheus makes it, on
// gauges as a listing of a million files in done/ leaves them: the scrape
// reads the cache, so the size of the queue does not enter.
func BenchmarkScrape(b *testing.B) {
	m := New()
	m.stages.set(queue.Done, queue.StageStats{Messages: 1_000_000}, true)
	m.stages.set(queue.Inbox, queue.StageStats{Messages: 50, Oldest: time.Now().Add(-time.Minute)}, true)
	m.Called("exec", "ok", time.Millisecond)
	m.Committed(1, time.Millisecond)
	h := m.Handler()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept", "text/plain")
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}

// TestCountOnlyListing: a listing by names alone updates a stage's count
// and keeps the oldest time of the last listing with ages, so that the
// count of a large backlog can be refreshed more often than its age.
func TestCountOnlyListing(t *testing.T) {
	m := New()
	hour := time.Now().Add(-time.Hour)
	m.stages.set(queue.Inbox, queue.StageStats{Messages: 5, Oldest: hour}, true)
	m.stages.set(queue.Inbox, queue.StageStats{Messages: 7}, false)
	fams := scrape(t, m.Handler())
	if n, _ := value(fams, "spool_queue_messages", "stage", "inbox"); n != 7 {
		t.Errorf("inbox count after a count-only listing = %v, want 7", n)
	}
	if age, _ := value(fams, "spool_queue_oldest_age_seconds", "stage", "inbox"); age < 3500 || age > 3700 {
		t.Errorf("inbox age after a count-only listing = %v s, want the hour of the listing with ages", age)
	}
	m.stages.set(queue.Error, queue.StageStats{}, true)
	m.stages.set(queue.Error, queue.StageStats{Messages: 1}, false)
	if age, _ := value(scrape(t, m.Handler()), "spool_queue_oldest_age_seconds", "stage", "error"); age > 60 {
		t.Errorf("error/ was empty, then one message: age %v s, want it counted from now", age)
	}
}
