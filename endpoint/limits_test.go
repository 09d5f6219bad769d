package endpoint

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// request sends one GET path on c and reads the whole answer, so that c
// is left an idle keep-alive connection.
func request(c net.Conn, r *bufio.Reader, path string) error {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: spool\r\n\r\n", path); err != nil {
		return fmt.Errorf("send a request: %w", err)
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("answer %d, want 200", resp.StatusCode)
	}
	return nil
}

// limitedServer serves h within lim on 127.0.0.1, logging to log, until
// the test ends; it returns the address.
func limitedServer(t *testing.T, lim Limits, h http.Handler, log *slog.Logger) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(context.Background(), h, log, lim)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(NewListener(ln, lim, log)) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// heldConn is a client connection and its reader.
type heldConn struct {
	c net.Conn
	r *bufio.Reader
}

// dialFrom connects to addr from the loopback address from (127.0.0.0/8
// is all loopback on Linux: each is a client of its own).
func dialFrom(t *testing.T, from, addr string) heldConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return heldConn{c, bufio.NewReader(c)}
}

// closedWithin reports whether the server closed h within d (a read
// returns EOF or a reset).
func closedWithin(h heldConn, d time.Duration) bool {
	_ = h.c.SetReadDeadline(time.Now().Add(d))
	defer h.c.SetReadDeadline(time.Time{})
	_, err := h.r.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func okHandler(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }

// TestEndpointIdleTimeout: the endpoints' server closes an idle
// keep-alive connection after its idle timeout, not before.
func TestEndpointIdleTimeout(t *testing.T) {
	t.Parallel()
	const idle = 700 * time.Millisecond
	lim := EndpointLimits
	lim.Idle = idle
	addr := limitedServer(t, lim, http.HandlerFunc(okHandler), slog.New(slog.DiscardHandler))
	var held []heldConn
	for range 4 {
		h := dialFrom(t, "127.0.0.1", addr)
		if err := request(h.c, h.r, "/"); err != nil {
			t.Fatal(err)
		}
		held = append(held, h)
	}
	idleSince := time.Now()
	closed := make(chan time.Duration, len(held))
	for _, h := range held {
		go func() {
			if !closedWithin(h, 30*time.Second) {
				t.Errorf("an idle connection was not closed within 30 s")
			}
			closed <- time.Since(idleSince)
		}()
	}
	for range held {
		switch took := <-closed; {
		case took < idle-50*time.Millisecond:
			t.Errorf("an idle connection closed after %v, before the idle timeout %v", took, idle)
		case took > idle+3*time.Second:
			t.Errorf("an idle connection closed after %v, long after the idle timeout %v", took, idle)
		}
	}
}

// TestEndpointAddressCap: one address holds at most perAddr connections:
// the next one is closed at once, another address is served, and once
// one of the first closes the address may connect again.
func TestEndpointAddressCap(t *testing.T) {
	t.Parallel()
	lim := EndpointLimits
	lim.Idle, lim.PerAddr = time.Minute, 3
	var logged strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))
	addr := limitedServer(t, lim, http.HandlerFunc(okHandler), log)
	var held []heldConn
	for range lim.PerAddr {
		h := dialFrom(t, "127.0.0.2", addr)
		if err := request(h.c, h.r, "/"); err != nil {
			t.Fatal(err)
		}
		held = append(held, h)
	}
	over := dialFrom(t, "127.0.0.2", addr)
	if !closedWithin(over, 5*time.Second) {
		t.Errorf("connection %d from one address: not closed at once (cap %d)", lim.PerAddr+1, lim.PerAddr)
	}
	other := dialFrom(t, "127.0.0.3", addr)
	if err := request(other.c, other.r, "/"); err != nil {
		t.Errorf("another address, with one address at its cap: %v", err)
	}
	held[0].c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		again := dialFrom(t, "127.0.0.2", addr)
		err := request(again.c, again.r, "/")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the address under its cap again: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // the server sees the close on its own goroutine
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), "too many connections from one address") || !strings.Contains(logged.String(), "addr=127.0.0.2 limit=3") {
		t.Errorf("no warning naming the address and its cap:\n%s", logged.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// TestEndpointConnectionCap: at the cap of connections open, a new one
// is served at once, and the connection that has waited longest on its
// client is closed for it: an idle one, one trickling its headers, one
// whose handler waits for a body trickled in, alike; when every
// connection is running a request, the new one waits for one to end.
func TestEndpointConnectionCap(t *testing.T) {
	t.Parallel()
	lim := EndpointLimits
	lim.Idle, lim.ReadHeader, lim.Conns = time.Minute, time.Minute, 4
	release, entered := make(chan struct{}), make(chan struct{}, lim.Conns)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/block":
			entered <- struct{}{}
			<-release
		case "/upload":
			entered <- struct{}{}
			if _, err := io.ReadAll(r.Body); err == nil {
				t.Errorf("the trickled body was read whole")
			}
		}
		okHandler(w, r)
	})
	var logged strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))
	addr := limitedServer(t, lim, h, log)

	// The cap, from as many addresses: idle, slow headers (half of
	// them), a slow body (its handler reading), slow headers.
	var held []heldConn
	for i := range lim.Conns {
		c := dialFrom(t, fmt.Sprintf("127.0.1.%d", i+1), addr)
		var err error
		switch i {
		case 0:
			err = request(c.c, c.r, "/")
		case 2:
			_, err = fmt.Fprint(c.c, "POST /upload HTTP/1.1\r\nHost: spool\r\nContent-Length: 100\r\n\r\nab")
			<-entered
		default:
			_, err = fmt.Fprint(c.c, "GET / HTTP/1.1\r\nHo")
		}
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		time.Sleep(5 * time.Millisecond) // an order of age the server sees
	}
	for i := range lim.Conns {
		c := dialFrom(t, "127.0.2.1", addr)
		start := time.Now()
		if err := request(c.c, c.r, "/"); err != nil {
			t.Fatalf("a new connection at the cap: %v", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("a new connection at the cap served after %v", took)
		}
		if !closedWithin(held[i], 5*time.Second) {
			t.Errorf("connection %d (the longest waiting on its client) not closed for the new one", i+1)
		}
		// c stays, idle: the next new one must make room too.
	}

	// Every slot running a request: the next connection waits for one.
	// Each request is running before the next connects: a connection
	// whose request the server has not read yet waits on its client as
	// far as anyone can tell, and may be the one closed to make room.
	var busy []heldConn
	for i := range lim.Conns {
		c := dialFrom(t, fmt.Sprintf("127.0.3.%d", i+1), addr)
		if _, err := fmt.Fprint(c.c, "GET /block HTTP/1.1\r\nHost: spool\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		busy = append(busy, c)
		<-entered
	}
	next := dialFrom(t, "127.0.4.1", addr)
	served := make(chan error, 1)
	go func() { served <- request(next.c, next.r, "/") }()
	select {
	case err := <-served:
		t.Fatalf("a connection over a cap of busy ones was served at once (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("the connection that waited: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the connection that waited was not served within 10 s of the requests ending")
	}
	for _, c := range busy {
		if _, err := http.ReadResponse(c.r, nil); err != nil {
			t.Errorf("a busy connection's request: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), "connection limit reached") || !strings.Contains(logged.String(), "limit=4") {
		t.Errorf("no warning that the cap was reached:\n%s", logged.String())
	}
}
