package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"
)

// Delay stands a TCP proxy on the loopback between the ledger URL dsn and
// its server, which holds every chunk of bytes for delay in each
// direction, and returns the URL that goes through it and the function
// that stops it. A ledger on another host is then measured on this one: a
// round trip to the server costs two delays more, and what a ledger path
// pays per round trip shows, where on the loopback it is lost in the
// noise. Bytes keep their order in each direction, and a chunk read while
// earlier ones wait is not held any longer for them: the proxy models a
// link's latency, not its bandwidth.
func Delay(ctx context.Context, dsn string, delay time.Duration) (string, func() error, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return "", nil, fmt.Errorf("delay %s: want a URL with host:port", dsn)
	}
	server := u.Host
	if u.Port() == "" {
		return "", nil, fmt.Errorf("delay %s: want a URL with a port", dsn)
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("delay %s: %w", dsn, err)
	}
	dialCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &delayProxy{l: l, server: server, delay: delay, conns: map[net.Conn]bool{}, dialCtx: dialCtx, cancel: cancel}
	p.wg.Go(p.accept)
	u.Host = l.Addr().String()
	return u.String(), p.stop, nil
}

// delayProxy is one proxy of Delay.
type delayProxy struct {
	l      net.Listener
	server string
	delay  time.Duration
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool // open, to close at stop
	closed bool
	// dialCtx, cancelled by stop, bounds the dials to the server.
	dialCtx context.Context
	cancel  context.CancelFunc
}

// accept takes connections until the listener is closed, and connects
// each to the server in a goroutine of its own, so that a server slow to
// answer holds up no other connection.
func (p *delayProxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Go(func() { p.connect(c) })
	}
}

// connect dials the server for c and forwards both ways, or closes c when
// the server cannot be reached within ten seconds or the proxy stops.
func (p *delayProxy) connect(c net.Conn) {
	d := net.Dialer{Timeout: 10 * time.Second}
	s, err := d.DialContext(p.dialCtx, "tcp", p.server)
	if err != nil || !p.track(s) {
		if s != nil {
			_ = s.Close()
		}
		p.untrack(c)
		return
	}
	var both sync.WaitGroup
	both.Go(func() { p.forward(s, c) })
	both.Go(func() { p.forward(c, s) })
	both.Wait()
	p.untrack(c)
	p.untrack(s)
}

// track notes c as open, or closes it and reports false when the proxy is
// stopping.
func (p *delayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

// untrack closes c and forgets it.
func (p *delayProxy) untrack(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// chunk is bytes read from one side, to be written to the other at due.
type chunk struct {
	b   []byte
	due time.Time
}

// forward copies src to dst, each chunk written delay after it was read,
// and closes both once src ends or dst fails.
func (p *delayProxy) forward(dst, src net.Conn) {
	queue := make(chan chunk, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range queue {
			time.Sleep(time.Until(c.due))
			if _, err := dst.Write(c.b); err != nil {
				_ = src.Close() // the reader's next Read fails, ending the loop below
				for range queue {
				}
				return
			}
		}
	}()
	for {
		buf := make([]byte, 64<<10)
		n, err := src.Read(buf)
		if n > 0 {
			queue <- chunk{buf[:n], time.Now().Add(p.delay)}
		}
		if err != nil {
			break
		}
	}
	close(queue)
	<-done
	_, _ = dst.Close(), src.Close()
}

// stop closes the listener and every connection, and waits for the
// forwarding to end.
func (p *delayProxy) stop() error {
	p.mu.Lock()
	p.closed = true
	p.cancel()
	err := p.l.Close()
	for c := range p.conns {
		_ = c.Close() // the connections' errors say nothing of the run
	}
	p.mu.Unlock()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
