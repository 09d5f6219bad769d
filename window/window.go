// Package window is the dedup window in Redis: a spool.Window that
// consumers on many hosts share in front of their ledger, Beetle-style.
// A msg_id is taken with SET NX and an owner token for a short in-flight
// time before the ledger is asked, marked done with the window's time
// once the ledger committed its processed row, and released by a
// compare-and-delete (a Lua script) when it was not processed. The
// ledger stays the truth; see spool.Window and docs/DESIGN.md, "The
// Redis dedup window".
package window

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/spoolq/spool"
)

// Defaults of a window's times: how long a msg_id is remembered as done,
// and how long one is held in flight before another owner may take it.
const (
	DefaultTTL      = time.Hour
	DefaultInFlight = 30 * time.Second
)

// Redis is a spool.Window in one Redis database. It is safe for
// concurrent use; Close releases its connections.
type Redis struct {
	c        *redis.Client
	prefix   string
	ttl      time.Duration
	inFlight time.Duration
	addr     string
}

// ErrBadURL is wrapped by Open's errors for a URL it cannot use.
var ErrBadURL = errors.New("want redis://HOST:PORT/DB, with ?ttl=D and ?inflight=D optional")

// Open returns the window at rawURL, redis://[USER:PASSWORD@]HOST:PORT/DB
// (rediss:// for TLS), whose optional query parameters ttl (default
// DefaultTTL) and inflight (default DefaultInFlight) set its times. Every
// key is the prefix (SetPrefix) followed by a msg_id. Open does not
// connect: a Redis down at the start is an outage like any other.
func Open(rawURL string) (*Redis, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		return nil, fmt.Errorf("dedup window %q: %w", rawURL, ErrBadURL)
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		if n, err := strconv.Atoi(db); err != nil || n < 0 {
			return nil, fmt.Errorf("dedup window %q: database %q: %w", rawURL, db, ErrBadURL)
		}
	}
	w := &Redis{ttl: DefaultTTL, inFlight: DefaultInFlight, addr: u.Host}
	q := u.Query()
	for name, d := range map[string]*time.Duration{"ttl": &w.ttl, "inflight": &w.inFlight} {
		if !q.Has(name) {
			continue
		}
		v, err := time.ParseDuration(q.Get(name))
		if err != nil || v < time.Second {
			return nil, fmt.Errorf("dedup window %q: %s=%q: want a duration of 1s or more: %w", rawURL, name, q.Get(name), ErrBadURL)
		}
		*d = v
		q.Del(name)
	}
	if w.inFlight >= w.ttl {
		return nil, fmt.Errorf("dedup window %q: inflight %v must be shorter than ttl %v: %w", rawURL, w.inFlight, w.ttl, ErrBadURL)
	}
	u.RawQuery = q.Encode()
	opt, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("dedup window %q: %v: %w", rawURL, err, ErrBadURL)
	}
	// A window that does not answer at once is down: the consumer goes on
	// with the ledger alone rather than wait for it.
	opt.DialTimeout = 500 * time.Millisecond
	opt.ReadTimeout = 500 * time.Millisecond
	opt.WriteTimeout = 500 * time.Millisecond
	opt.MaxRetries = 1
	opt.DisableIdentity = true // no CLIENT SETINFO: older servers refuse it
	w.c = redis.NewClient(opt)
	return w, nil
}

// SetPrefix sets the prefix of every key, before the window is used: give
// each queue a prefix of its own (cmd/spool uses the queue's identity),
// since a msg_id done for one queue's ledger says nothing of another's.
func (w *Redis) SetPrefix(prefix string) { w.prefix = prefix }

// Addr is the window's HOST:PORT, for messages.
func (w *Redis) Addr() string { return w.addr }

// Close closes the window's connections.
func (w *Redis) Close() error { return w.c.Close() }

// Ping checks that the window answers.
func (w *Redis) Ping(ctx context.Context) error {
	if err := w.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("dedup window %s: %w", w.addr, err)
	}
	return nil
}

// The values of a key: "o:" and the owner while in flight, "d:" and the
// processed content hash once done.
const (
	ownerMark = "o:"
	doneMark  = "d:"
)

// acquire takes each key in flight for ARGV[1] for ARGV[2] ms unless it
// is set, and returns "" for each key taken and the value of the others.
var acquire = redis.NewScript(`
local r = {}
for i, k in ipairs(KEYS) do
  if redis.call('SET', k, ARGV[1], 'NX', 'PX', ARGV[2]) then
    r[i] = ''
  else
    r[i] = redis.call('GET', k) or ''
  end
end
return r
`)

// release deletes each key whose value is still ARGV[1]: compare and
// delete in one step, so that a key done or taken by another owner since
// is never deleted.
var release = redis.NewScript(`
local n = 0
for _, k in ipairs(KEYS) do
  if redis.call('GET', k) == ARGV[1] then
    redis.call('DEL', k)
    n = n + 1
  end
end
return n
`)

// Acquire implements spool.Window.
func (w *Redis) Acquire(ctx context.Context, msgIDs []string, owner string) ([]spool.WindowEntry, error) {
	token := ownerMark + owner
	vals, err := acquire.Run(ctx, w.c, w.keys(msgIDs), token, w.inFlight.Milliseconds()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("dedup window %s: acquire: %w", w.addr, err)
	}
	if len(vals) != len(msgIDs) {
		return nil, fmt.Errorf("dedup window %s: acquire: %d answers for %d keys", w.addr, len(vals), len(msgIDs))
	}
	out := make([]spool.WindowEntry, len(vals))
	for i, v := range vals {
		switch {
		case v == "" || v == token:
			out[i] = spool.WindowEntry{State: spool.WindowAcquired}
		case strings.HasPrefix(v, doneMark):
			out[i] = spool.WindowEntry{State: spool.WindowDone, Hash: v[len(doneMark):]}
		default:
			out[i] = spool.WindowEntry{State: spool.WindowBusy}
		}
	}
	return out, nil
}

// Done implements spool.Window.
func (w *Redis) Done(ctx context.Context, msgIDs, hashes []string) error {
	if len(msgIDs) != len(hashes) {
		return fmt.Errorf("dedup window %s: done: %d hashes for %d keys", w.addr, len(hashes), len(msgIDs))
	}
	_, err := w.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range msgIDs {
			p.Set(ctx, w.prefix+id, doneMark+hashes[i], w.ttl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("dedup window %s: done: %w", w.addr, err)
	}
	return nil
}

// Release implements spool.Window.
func (w *Redis) Release(ctx context.Context, msgIDs []string, owner string) error {
	if err := release.Run(ctx, w.c, w.keys(msgIDs), ownerMark+owner).Err(); err != nil {
		return fmt.Errorf("dedup window %s: release: %w", w.addr, err)
	}
	return nil
}

// keys are the window's keys of msgIDs.
func (w *Redis) keys(msgIDs []string) []string {
	k := make([]string, len(msgIDs))
	for i, id := range msgIDs {
		k[i] = w.prefix + id
	}
	return k
}

var _ spool.Window = (*Redis)(nil)
