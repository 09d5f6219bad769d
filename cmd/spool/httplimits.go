package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// httpLimits bound what a client of the metrics and health endpoints can
// hold: a connection that sends nothing, a slow one, an idle keep-alive
// one, and how many are open at once.
type httpLimits struct {
	// readHeader bounds the wait for a request's headers, read the whole
	// request (the endpoints take no body).
	readHeader, read time.Duration
	// write bounds a response, from the end of the request's headers: a
	// scrape reads cached values, a readiness check answers within 2 s.
	write time.Duration
	// idle closes a keep-alive connection with no request for this long.
	// It is above the usual scrape intervals (15 s, 1 min), so a
	// Prometheus keeps its connection between scrapes.
	idle time.Duration
	// conns caps the connections open at once; one more waits in the
	// kernel's backlog until one closes (at the latest after idle).
	conns int
}

// endpointLimits are the limits of consume --listen and serve.
var endpointLimits = httpLimits{
	readHeader: 5 * time.Second,
	read:       10 * time.Second,
	write:      30 * time.Second,
	idle:       2 * time.Minute,
	conns:      64,
}

// consoleLimits are serve --auth's: its API takes small JSON bodies and
// answers pages of the ledger, and a browser keeps a few connections.
var consoleLimits = httpLimits{
	readHeader: 5 * time.Second,
	read:       30 * time.Second,
	write:      2 * time.Minute,
	idle:       2 * time.Minute,
	conns:      128,
}

// newEndpointServer is the HTTP server of the endpoints, serving h within
// lim, its requests' contexts derived from ctx.
func newEndpointServer(ctx context.Context, h http.Handler, log *slog.Logger, lim httpLimits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.readHeader,
		ReadTimeout:       lim.read,
		WriteTimeout:      lim.write,
		IdleTimeout:       lim.idle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
}

// limitListener accepts at most n connections open at once: Accept waits
// for one to close. It logs at warn when it reaches n, once until the
// count drops below again.
type limitListener struct {
	net.Listener
	log   *slog.Logger
	slots chan struct{}
	done  chan struct{}
	close sync.Once
	full  atomic.Bool
}

func newLimitListener(ln net.Listener, n int, log *slog.Logger) *limitListener {
	return &limitListener{Listener: ln, log: log, slots: make(chan struct{}, n), done: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	if len(l.slots) == cap(l.slots) && !l.full.Swap(true) {
		l.log.Warn("metrics endpoint: connection limit reached; new connections wait until one closes", "limit", cap(l.slots))
	}
	c, err := l.Listener.Accept()
	if err != nil {
		l.release()
		return nil, err
	}
	return &limitConn{Conn: c, release: sync.OnceFunc(l.release)}, nil
}

func (l *limitListener) release() {
	<-l.slots
	l.full.Store(false)
}

// Close stops Accept, waiting or not, and closes the listener.
func (l *limitListener) Close() error {
	l.close.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back when closed, once.
type limitConn struct {
	net.Conn
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
