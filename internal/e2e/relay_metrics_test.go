//go:build linux

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
)

// TestRelayMetrics: the outbox's gauges and the relay's counters by
// target. spool serve shows the rows waiting and the oldest's age; a
// relay with --listen, to a target that fails one row once (a 503,
// retried) and refuses another (a 400, parked), counts each publish, both
// failures and the parked row; the parked row's aggregate waits behind it
// (--on-park block), which the gauges show as rows waiting and growing
// old, what SpoolRelayStuck fires on. Unparked once the target takes it,
// every row goes and the gauges come to nothing waiting.
func TestRelayMetrics(t *testing.T) {
	t.Parallel()
	q, _ := outboxQueue(t, 30, 3)
	srvp, base := startListening(t, "serve", q, "--listen", "127.0.0.1:0", "--metrics-refresh", "50ms")
	fs := waitMetrics(t, base, []want{{"spool_outbox_pending_rows", nil, 30}, {"spool_outbox_parked_rows", nil, 0}})
	if age, ok := fs.value("spool_outbox_oldest_pending_age_seconds"); !ok || age <= 0 {
		t.Errorf("spool_outbox_oldest_pending_age_seconds = %v (served %v), want the first row's age", age, ok)
	}
	if err := srvp.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	srvp.wait(t)

	var failedOnce, refuse atomic.Bool
	refuse.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var e envelope
		if err := json.Unmarshal(body, &e); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		switch {
		case e.OutboxID == 5 && failedOnce.CompareAndSwap(false, true):
			http.Error(w, "try later", http.StatusServiceUnavailable)
		case e.OutboxID == 7 && refuse.Load():
			http.Error(w, "refused", http.StatusBadRequest)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(srv.Close)
	p, base := startListening(t, "relay", q, "--to", srv.URL, "--watch", "--listen", "127.0.0.1:0",
		"--metrics-refresh", "50ms", "--retry-base", "10ms", "--poll", "20ms")
	target := []string{"target", srv.URL}
	// Row 7 is a00's third (rows go a00, a01, a02, a00...): a00's seven
	// rows after it wait.
	fs = waitMetrics(t, base, []want{
		{"spool_relay_published_total", target, 22},
		{"spool_relay_failures_total", target, 2},
		{"spool_relay_parked_total", target, 1},
		{"spool_outbox_pending_rows", nil, 7},
		{"spool_outbox_parked_rows", nil, 1},
	})
	if age, ok := fs.value("spool_outbox_oldest_pending_age_seconds"); !ok || age <= 0 {
		t.Errorf("with a00 blocked, spool_outbox_oldest_pending_age_seconds = %v (served %v), want its waiting row's age", age, ok)
	}
	refuse.Store(false)
	mustRun(t, 0, "relay", q, "--unpark")
	waitMetrics(t, base, []want{
		{"spool_relay_published_total", target, 30},
		{"spool_relay_failures_total", target, 2},
		{"spool_relay_parked_total", target, 1},
		{"spool_outbox_pending_rows", nil, 0},
		{"spool_outbox_oldest_pending_age_seconds", nil, 0},
		{"spool_outbox_parked_rows", nil, 0},
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t); r.code != 0 {
		t.Fatalf("relay stopped by SIGTERM: %s", r)
	}
}
