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
	p := &delayProxy{l: l, server: server, delay: delay, conns: map[net.Conn]bool{}}
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
}

// accept forwards each accepted connection to the server until the
// listener is closed.
func (p *delayProxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.server)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Go(func() { p.forward(s, c) })
		p.wg.Go(func() { p.forward(c, s) })
	}
}

// track notes c and s as open, or closes them and reports false when the
// proxy is stopping.
func (p *delayProxy) track(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_, _ = c.Close(), s.Close()
		return false
	}
	p.conns[c], p.conns[s] = true, true
	return true
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
