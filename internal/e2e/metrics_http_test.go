//go:build linux

package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// prometheusAccept is the Accept header Prometheus sends with a scrape.
const prometheusAccept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

// scrapeAs fetches /metrics with the Accept header accept (none when
// empty) and returns the Content-Type and the body.
func scrapeAs(t *testing.T, base, accept string) (string, string) {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v\n%s", resp.StatusCode, err, body)
	}
	return resp.Header.Get("Content-Type"), string(body)
}

// TestMetricsOpenMetrics: consume --listen and serve answer a scrape that
// asks for OpenMetrics (Prometheus's own Accept header) in OpenMetrics,
// its Content-Type and its closing "# EOF" line, and a scrape that asks
// for nothing in Prometheus's text format, without that line.
func TestMetricsOpenMetrics(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"serve", "consume"} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			q := filepath.Join(t.TempDir(), "q")
			mustRun(t, 0, "init", q)
			putMessage(t, q, "a.json", metricsMessage("a", "1.00"))
			mustRun(t, 0, "consume", q)
			args := []string{"serve", q, "--listen", "127.0.0.1:0", "--metrics-refresh", "100ms"}
			if cmd == "consume" {
				args = []string{"consume", q, "--watch", "--exec", "cat >/dev/null", "--listen", "127.0.0.1:0", "--metrics-refresh", "100ms"}
			}
			p, base := startListening(t, args...)
			waitMetrics(t, base, []want{{"spool_queue_messages", []string{"stage", "done"}, 1}})

			ct, body := scrapeAs(t, base, prometheusAccept)
			if !strings.HasPrefix(ct, "application/openmetrics-text") {
				t.Errorf("asked for OpenMetrics: Content-Type %q, want application/openmetrics-text", ct)
			}
			if !strings.HasSuffix(body, "\n# EOF\n") {
				t.Errorf("asked for OpenMetrics: the body does not end with the line \"# EOF\":\n...%s", body[max(0, len(body)-200):])
			}
			if !strings.Contains(body, "\nspool_queue_messages{stage=\"done\"} 1.0\n") {
				t.Errorf("asked for OpenMetrics: no sample spool_queue_messages{stage=\"done\"} 1.0 in\n%s", body)
			}
			if !strings.Contains(body, "\nspool_deliveries_total{outcome=\"processed\"} ") {
				t.Errorf("asked for OpenMetrics: no counter sample spool_deliveries_total{outcome=\"processed\"} in\n%s", body)
			}
			for _, accept := range []string{"", "text/plain"} {
				ct, body := scrapeAs(t, base, accept)
				if !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
					t.Errorf("Accept %q: Content-Type %q, want text/plain; version=0.0.4", accept, ct)
				}
				if strings.Contains(body, "# EOF") {
					t.Errorf("Accept %q: the text format holds a \"# EOF\" line", accept)
				}
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if r := p.wait(t); r.code != 0 {
				t.Fatalf("after SIGTERM: want exit 0\n%s", r)
			}
		})
	}
}

// endpointConnections and endpointConnectionsPerAddress are the caps on
// the endpoints' open connections that docs/OPERATIONS.md states.
const endpointConnections, endpointConnectionsPerAddress = 512, 16

// TestEndpointConnectionCap: spool serve holds at most 16 connections
// from one address (the next one is closed at once) and 512 in all: at
// that cap a new scrape is served at once, and the connection idle
// longest is closed for it. It logs both, goes on serving, and exits 0
// at SIGTERM.
func TestEndpointConnectionCap(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	p, base := startListening(t, "serve", q, "--listen", "127.0.0.1:0")
	addr := strings.TrimPrefix(base, "http://")
	ask := func(c net.Conn, r *bufio.Reader, path string) error {
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: spool\r\n\r\n", path); err != nil {
			return err
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	scrape := func(c net.Conn, r *bufio.Reader) error { return ask(c, r, "/metrics") }
	dial := func(from string) (net.Conn, *bufio.Reader) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	type conn struct {
		c net.Conn
		r *bufio.Reader
	}
	var held []conn
	for i := range endpointConnectionsPerAddress {
		c, r := dial("127.0.0.1")
		if err := scrape(c, r); err != nil {
			t.Fatalf("scrape %d of %d from one address: %v", i+1, endpointConnectionsPerAddress, err)
		}
		held = append(held, conn{c, r}) // idle, kept alive
		if i == 0 {
			// The server counts a connection idle from when it marks it
			// so, just after writing its response: the next scrape's
			// connection, answered meanwhile, could otherwise be marked
			// first on a busy machine (it was, once in many runs), and
			// be the one closed at the cap.
			time.Sleep(250 * time.Millisecond)
		}
	}
	if err := scrape(dial("127.0.0.1")); err == nil {
		t.Fatalf("a scrape over the cap of %d connections from one address was answered: no cap", endpointConnectionsPerAddress)
	}
	// The others, 16 at a time and each with a cheap request: all must be
	// open within the idle timeout (5 s), which closes the first ones
	// otherwise, and a loaded machine under -race is slow to serve 496
	// scrapes one after the other.
	var (
		fill   sync.WaitGroup
		fillMu sync.Mutex
		errs   []error
	)
	slots := make(chan struct{}, 16)
	filling := time.Now()
	for i := range endpointConnections - endpointConnectionsPerAddress {
		c, r := dial(fmt.Sprintf("127.0.%d.%d", 5+i/250, i%250+1))
		slots <- struct{}{}
		fill.Go(func() {
			defer func() { <-slots }()
			if err := ask(c, r, "/healthz"); err != nil {
				fillMu.Lock()
				errs = append(errs, err)
				fillMu.Unlock()
			}
		})
	}
	fill.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d requests from other addresses under the cap failed, the first: %v", len(errs), errs[0])
	}
	t.Logf("%d connections open in %v", endpointConnections, time.Since(filling).Round(time.Millisecond))
	start := time.Now()
	if err := scrape(dial("127.0.9.1")); err != nil {
		t.Fatalf("a scrape at the cap of %d connections: %v", endpointConnections, err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a scrape at the cap of %d connections took %v", endpointConnections, took)
	}
	// Well within the idle timeout (5 s), which would close it anyway.
	_ = held[0].c.SetReadDeadline(time.Now().Add(time.Second))
	var ne net.Error
	if _, err := held[0].r.ReadByte(); err == nil || errors.As(err, &ne) && ne.Timeout() {
		var closed []int
		for i, h := range held[1:] {
			_ = h.c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			if _, err := h.r.ReadByte(); err == nil || !errors.As(err, &ne) || !ne.Timeout() {
				closed = append(closed, i+1)
			}
		}
		t.Errorf("the connection idle longest was not closed for the scrape at the cap: %v (closed instead, of the 16 from one address: %v)", err, closed)
	}
	if code, body := get(t, base, "/healthz"); code != 200 {
		t.Errorf("/healthz at the cap: %d %q", code, body)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res := p.wait(t)
	if res.code != 0 {
		t.Fatalf("serve after SIGTERM: want exit 0\n%s", res)
	}
	for _, w := range []string{fmt.Sprintf("connection limit reached; closing those waiting longest on their client to make room\" limit=%d", endpointConnections),
		fmt.Sprintf("too many connections from one address; closing its new ones\" addr=127.0.0.1 limit=%d", endpointConnectionsPerAddress)} {
		if !strings.Contains(res.stderr, w) {
			t.Errorf("serve did not log %q:\n%s", w, res.stderr)
		}
	}
}
