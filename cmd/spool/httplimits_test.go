package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

// request sends one GET /healthz on c and reads the whole answer, so that
// c is left an idle keep-alive connection.
func request(t *testing.T, c net.Conn, r *bufio.Reader) {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: spool\r\n\r\n"); err != nil {
		t.Fatalf("send a request: %v", err)
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("answer %d, want 200", resp.StatusCode)
	}
}

// TestEndpointLimits: the endpoints' server closes an idle keep-alive
// connection after its idle timeout, and holds no more than its cap of
// connections open: one more waits unserved, without harm, and is served
// once the idle ones are closed.
func TestEndpointLimits(t *testing.T) {
	t.Parallel()
	const idle, conns = 700 * time.Millisecond, 4
	lim := endpointLimits
	lim.idle, lim.conns = idle, conns
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	srv := newEndpointServer(context.Background(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	}), log, lim)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(newLimitListener(ln, lim.conns, log)) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}

	type idleConn struct {
		c net.Conn
		r *bufio.Reader
	}
	var held []idleConn
	for range conns {
		c, r := dial()
		request(t, c, r)
		held = append(held, idleConn{c, r})
	}
	idleSince := time.Now()
	// One connection over the cap: its request waits.
	extra, extraR := dial()
	answered := make(chan time.Time, 1)
	go func() {
		request(t, extra, extraR)
		answered <- time.Now()
	}()
	closed := make(chan time.Time, conns)
	for _, h := range held {
		go func() {
			_ = h.c.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, err := h.r.ReadByte()
			if err != io.EOF {
				t.Errorf("an idle connection: read %v, want io.EOF (closed by the server)", err)
			}
			closed <- time.Now()
		}()
	}
	var last time.Time
	for range conns {
		at := <-closed
		switch took := at.Sub(idleSince); {
		case took < idle-50*time.Millisecond:
			t.Errorf("an idle connection closed after %v, before the idle timeout %v", took, idle)
		case took > idle+3*time.Second:
			t.Errorf("an idle connection closed after %v, long after the idle timeout %v", took, idle)
		}
		last = at
	}
	select {
	case at := <-answered:
		if at.Before(idleSince.Add(idle - 50*time.Millisecond)) {
			t.Errorf("the connection over the cap of %d was served after %v, while the cap was held", conns, at.Sub(idleSince))
		}
		if at.Sub(last) > 5*time.Second {
			t.Errorf("the connection over the cap was served %v after the idle ones closed", at.Sub(last))
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the connection over the cap was not served within 10 s of the idle ones closing")
	}
}
