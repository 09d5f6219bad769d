package endpoint

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Limits bound what a client of the metrics and health endpoints, and of
// --auth's console, can hold: a connection that sends
// nothing, a slow one, an idle keep-alive one, how many one address has
// open, and how many are open at once.
type Limits struct {
	// ReadHeader bounds the wait for a request's headers, from the
	// connection's accept or its first byte after an idle time; Read the
	// whole request.
	ReadHeader, Read time.Duration
	// Write bounds a response, from the end of the request's headers: a
	// scrape reads cached values, a readiness check answers within 2 s.
	Write time.Duration
	// Idle closes a keep-alive connection with no request for this long.
	// It is short: an idle connection holds a slot that a new client
	// may need, and a Prometheus scraping every 15 s or more simply opens
	// a new one (a handshake on a LAN costs less than the scrape).
	Idle time.Duration
	// Conns caps the connections open at once; PerAddr those of one
	// client address (see NewListener).
	Conns, PerAddr int
}

// EndpointLimits are the limits of consume --listen and serve (a copy
// is the caller's to change). The cap
// of connections open is well above what scrapes, probes and a few
// browsers hold, so that a few hundred idle or slow clients find room
// beside them without any being closed (an idle connection costs a
// goroutine and a descriptor; Go lifts the descriptors' soft limit to the
// hard one at start); beyond it the one waiting longest on its client is
// closed (limitListener).
var EndpointLimits = Limits{
	ReadHeader: 5 * time.Second,
	Read:       10 * time.Second,
	Write:      30 * time.Second,
	Idle:       5 * time.Second,
	Conns:      512,
	PerAddr:    16,
}

// ConsoleLimits are --auth's (serve, consume): its API takes small JSON bodies and
// answers pages of the ledger, and a browser keeps up to 6 connections
// to a host, a few operators behind one NAT more.
var ConsoleLimits = Limits{
	ReadHeader: 5 * time.Second,
	Read:       30 * time.Second,
	Write:      2 * time.Minute,
	Idle:       5 * time.Second,
	Conns:      512,
	PerAddr:    32,
}

// NewServer is the HTTP server of the endpoints, serving h within lim,
// its requests' contexts derived from ctx, its errors logged to log at
// warn. Served on NewListener's listener, it tells the listener which
// connections are running a request.
func NewServer(ctx context.Context, h http.Handler, log *slog.Logger, lim Limits) *http.Server {
	return &http.Server{
		Handler:           trackRequests(h),
		ReadHeaderTimeout: lim.ReadHeader,
		ReadTimeout:       lim.Read,
		WriteTimeout:      lim.Write,
		IdleTimeout:       lim.Idle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext:       withLimitConn,
		ConnState:         answered,
	}
}

// limitListener holds at most max connections open at once, and at most
// perAddr from one client address (the TCP peer's; an IPv6 address
// counts by its /64, which one host commonly holds whole).
//
// A connection over perAddr is closed at once: one address cannot take
// the slots of everyone else. A connection that would pass max closes,
// to make room, the one that has waited longest on its client: an idle
// keep-alive connection, one still trickling its headers or stalling its
// TLS handshake, one whose handler waits for the next bytes of a body
// trickled in. Only when every connection is running a request that does
// not wait on its client does Accept wait for one to end (or to wait), the
// new connection held in the meanwhile. So idle and slow clients cannot
// keep another out, as they could when the next connection waited in the
// kernel's backlog for a slot, for up to the idle or read timeout.
//
// Both are logged at warn, at once and then at most once a minute with
// how many connections were closed since.
type limitListener struct {
	net.Listener
	log          *slog.Logger
	max, perAddr int

	mu sync.Mutex
	// changed is signalled when a connection closes or ends a request,
	// and when the listener closes.
	changed *sync.Cond
	conns   map[*limitConn]struct{}
	byAddr  map[netip.Addr]int
	closed  bool
	full    warning // connections closed to make room at max
	crowded warning // connections closed over perAddr
}

// warning is a warn record given at most once a minute.
type warning struct {
	last   time.Time
	closed int // since last
}

// warnEvery is how often a warning of limitListener is given at most.
const warnEvery = time.Minute

// NewListener serves ln within lim's Conns and PerAddr (limitListener
// says how), logging what it closes to log at warn.
func NewListener(ln net.Listener, lim Limits, log *slog.Logger) net.Listener {
	l := &limitListener{Listener: ln, log: log, max: lim.Conns, perAddr: lim.PerAddr,
		conns: map[*limitConn]struct{}{}, byAddr: map[netip.Addr]int{}}
	l.changed = sync.NewCond(&l.mu)
	return l
}

// Accept returns the next connection within the limits.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// admit makes room for c and returns it tracked, or closes it and
// returns nil (over its address's cap, or the listener closed).
func (l *limitListener) admit(c net.Conn) *limitConn {
	addr := clientAddr(c.RemoteAddr())
	l.mu.Lock()
	if l.byAddr[addr] >= l.perAddr {
		if l.crowded.due() {
			l.log.Warn("metrics endpoint: too many connections from one address; closing its new ones",
				"addr", addrText(addr), "limit", l.perAddr, "closed", l.crowded.closed)
		}
		l.mu.Unlock()
		_ = c.Close() // refused: nothing was read or written
		return nil
	}
	// spoken: connections passed over in this admit, whose client has
	// sent bytes the server has not read yet.
	var spoken map[*limitConn]bool
	for len(l.conns) >= l.max && !l.closed {
		v := l.longestWaiting(spoken)
		if v != nil && v.unread() {
			// Waiting on the server, not on its client: its request is
			// in the socket, and its goroutine has not read it yet (a
			// busy machine). Under a flood of new connections it would
			// otherwise be the one closed, before it was served.
			if spoken == nil {
				spoken = map[*limitConn]bool{}
			}
			spoken[v] = true
			continue
		}
		if v == nil {
			if len(spoken) > 0 {
				// Every waiting connection has a request unread: close
				// the one that waited longest all the same rather than
				// hold the new one.
				v = l.longestWaiting(nil)
			}
			if v == nil {
				l.changed.Wait()
				continue
			}
		}
		l.drop(v)
		if l.full.due() {
			l.log.Warn("metrics endpoint: connection limit reached; closing those waiting longest on their client to make room",
				"limit", l.max, "closed", l.full.closed)
		}
		l.mu.Unlock()
		_ = v.Conn.Close() // its server goroutine sees the error and ends
		l.mu.Lock()
	}
	if l.closed {
		l.mu.Unlock()
		_ = c.Close()
		return nil
	}
	lc := &limitConn{Conn: c, l: l, addr: addr, since: time.Now()}
	l.conns[lc] = struct{}{}
	l.byAddr[addr]++
	l.mu.Unlock()
	return lc
}

// due counts one connection closed and reports whether to warn now,
// starting a new count if so.
func (w *warning) due() bool {
	w.closed++
	if now := time.Now(); now.Sub(w.last) >= warnEvery {
		w.last = now
		return true
	}
	return false
}

// longestWaiting is the connection that has waited on its client for
// the longest, but those of skip, nil when none waits. l.mu is held.
func (l *limitListener) longestWaiting(skip map[*limitConn]bool) *limitConn {
	var v *limitConn
	for c := range l.conns {
		if c.reading == c.busy && c.answering == 0 && !skip[c] && (v == nil || c.since.Before(v.since)) {
			v = c
		}
	}
	return v
}

// drop takes c out of the counts, once. l.mu is held.
func (l *limitListener) drop(c *limitConn) {
	if c.gone {
		return
	}
	c.gone = true
	delete(l.conns, c)
	if l.byAddr[c.addr]--; l.byAddr[c.addr] <= 0 {
		delete(l.byAddr, c.addr)
	}
	l.changed.Broadcast()
}

// Close stops Accept, waiting or not, and closes the listener.
func (l *limitListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.changed.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// limitConn is a connection of a limitListener: it leaves the counts when
// closed, and counts its requests in a handler and those of them blocked
// reading their body (trackRequests).
type limitConn struct {
	net.Conn
	l    *limitListener
	addr netip.Addr
	// Guarded by l.mu: the requests in a handler, those of them reading
	// their body, those whose handler returned and whose response the
	// server may not have written out yet (until the connection is idle:
	// closed before, its client would read a response cut short), since
	// when it has waited on its client (its accept, its last response
	// written, the start of a body's read) when all of them are, and
	// whether it left the counts.
	busy, reading, answering int
	since                    time.Time
	gone                     bool
}

// unread reports whether c's socket holds bytes its client sent that the
// server has not read yet: a request that waits on the server, not on its
// client. A slow client's trickle is read as it comes, and an idle one has
// sent nothing; a connection that cannot be asked counts as having nothing.
func (c *limitConn) unread() bool {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	if err := rc.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) // an error leaves 0: nothing known
	}); err != nil {
		return false
	}
	return n > 0
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.drop(c)
	c.l.mu.Unlock()
	return err
}

func (c *limitConn) begin() {
	c.l.mu.Lock()
	c.busy++
	c.l.mu.Unlock()
}

// end is a handler's return: its response is still to be written out.
func (c *limitConn) end() {
	c.l.mu.Lock()
	c.busy--
	c.answering++
	c.l.mu.Unlock()
}

// answered is http.Server.ConnState: a connection gone idle has written
// its responses out, and now waits on its client.
func answered(nc net.Conn, state http.ConnState) {
	c, ok := limitConnOf(nc)
	if !ok || state != http.StateIdle {
		return
	}
	c.l.mu.Lock()
	c.answering = 0
	if c.reading == c.busy {
		c.since = time.Now()
		c.l.changed.Broadcast()
	}
	c.l.mu.Unlock()
}

// Read of a request's body waits on the client: its connection may be
// closed to make room meanwhile.
func (b *trackedBody) Read(p []byte) (int, error) {
	c := b.c
	c.l.mu.Lock()
	if c.reading++; c.reading == c.busy && c.answering == 0 {
		c.since = time.Now()
		c.l.changed.Broadcast()
	}
	c.l.mu.Unlock()
	n, err := b.ReadCloser.Read(p)
	c.l.mu.Lock()
	c.reading--
	c.l.mu.Unlock()
	return n, err
}

// trackedBody is a request's body whose reads its connection counts.
type trackedBody struct {
	io.ReadCloser
	c *limitConn
}

// limitConnKey is the context key of a request's *limitConn.
type limitConnKey struct{}

// withLimitConn is http.Server.ConnContext: ctx with c's *limitConn, found
// under a *tls.Conn too.
func withLimitConn(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := limitConnOf(c); ok {
		return context.WithValue(ctx, limitConnKey{}, lc)
	}
	return ctx
}

// limitConnOf is the *limitConn c is, or wraps (a *tls.Conn).
func limitConnOf(c net.Conn) (*limitConn, bool) {
	for {
		if lc, ok := c.(*limitConn); ok {
			return lc, true
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil, false
		}
		c = u.NetConn()
	}
}

// trackRequests marks the connection of each request h serves as busy
// while it does, except while it waits for the request's body, so that
// limitListener does not close it to make room.
func trackRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(limitConnKey{}).(*limitConn); ok {
			c.begin()
			defer c.end()
			if r.Body != nil && r.Body != http.NoBody {
				r.Body = &trackedBody{ReadCloser: r.Body, c: c}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// clientAddr is the address a connection from a counts under: the
// peer's IPv4 address, or its IPv6 address's /64; the unspecified
// address for a peer that is no IP address.
func clientAddr(a net.Addr) netip.Addr {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.IPv6Unspecified()
	}
	ip := ap.Addr().Unmap()
	if ip.Is4() {
		return ip
	}
	p, err := ip.WithZone("").Prefix(64)
	if err != nil {
		return netip.IPv6Unspecified()
	}
	return p.Addr()
}

// addrText is a clientAddr as the log names it.
func addrText(a netip.Addr) string {
	if a.Is4() {
		return a.String()
	}
	return a.String() + "/64"
}
