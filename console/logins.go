package console

import (
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Sign-ins are limited per client address: a token guessed at the rate a
// loop can post costs the server a hash, a session check and a refusal
// each, and a person typing needs a few tries at most. The limit counts
// every try, a right token's too (it is checked before the token is), and
// a try over it is answered 429 with Retry-After and is not counted.
const (
	// loginRate is the sign-ins a second one address may try, sustained.
	loginRate = 2
	// loginBurst is the sign-ins one address may try at once, after a
	// pause of loginBurst/loginRate seconds.
	loginBurst = 5
	// loginClients is how many addresses have a limiter of their own at
	// once; the addresses over it share one.
	loginClients = 4096
	// loginForget is how long an address's limiter is kept unused: well
	// past the loginBurst/loginRate seconds after which it is full again,
	// as a new one is.
	loginForget = time.Minute
)

// loginLimiter is the sign-in limiter of each client address. An IPv6
// address counts by its /64, which one host commonly holds whole.
type loginLimiter struct {
	mu     sync.Mutex
	by     map[netip.Addr]*loginClient
	shared *rate.Limiter
	swept  time.Time
}

type loginClient struct {
	lim  *rate.Limiter
	seen time.Time
}

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{by: map[netip.Addr]*loginClient{}, shared: rate.NewLimiter(loginRate, loginBurst)}
}

// allow reports whether client may try to sign in now; when not, wait is
// how long until it may.
func (l *loginLimiter) allow(client string) (wait time.Duration, ok bool) {
	key := clientPrefix(client)
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.by[key]
	if c == nil {
		if len(l.by) >= loginClients || now.Sub(l.swept) >= loginForget {
			l.sweep(now)
		}
		if len(l.by) < loginClients {
			c = &loginClient{lim: rate.NewLimiter(loginRate, loginBurst)}
			l.by[key] = c
		}
	}
	lim := l.shared
	if c != nil {
		c.seen, lim = now, c.lim
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now) // a refused try is not counted
		return d, false
	}
	return 0, true
}

// sweep forgets the limiters unused for loginForget.
func (l *loginLimiter) sweep(now time.Time) {
	for k, c := range l.by {
		if now.Sub(c.seen) >= loginForget {
			delete(l.by, k)
		}
	}
	l.swept = now
}

// clientPrefix is the address a client is limited by: client itself,
// or for IPv6 its /64. A client that is no address (a test's) is the
// unspecified address: all such share a limiter.
func clientPrefix(client string) netip.Addr {
	a, err := netip.ParseAddr(client)
	if err != nil {
		return netip.IPv6Unspecified()
	}
	a = a.Unmap()
	if a.Is4() {
		return a
	}
	p, err := a.WithZone("").Prefix(64)
	if err != nil {
		return netip.IPv6Unspecified()
	}
	return p.Addr()
}
