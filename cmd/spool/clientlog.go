package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/ledger/mysql"
	"github.com/spoolq/spool/relay"
	"github.com/spoolq/spool/window"
)

// The clients spool links write lines of their own: go-redis on every
// failed dial ("redis: ... failed to dial after 5 attempts"), the MySQL
// driver on every connection it finds dead ("[mysql] ... invalid
// connection"), nats.go on an asynchronous error; the standard log
// package is there for anything else. Left to themselves they print plain
// text on stderr, which breaks --log-format json's promise that every
// line is one object, and repeat themselves: sixteen "failed to dial"
// lines a consumer in a five-second Redis outage, which the consumer's
// own "dedup window unavailable" already says once. So the program routes
// them, once at its start (routeClientLogs), into the logger of the
// command that runs (clientLogs.use: consume's and serve's, in their
// format; a text logger on stderr before that and for the other
// commands), each a record with client=NAME, and lets one line of each
// distinct text (its numbers aside) through every clientLogEvery, the
// next saying how many were held back (suppressed=N); what is held at the
// end is said at the end (flush).

// clientLogEvery is how often one distinct line of a client may be
// logged.
const clientLogEvery = 5 * time.Second

// clientLogs is the process's one router of the clients' lines. Until
// routeClientLogs it discards them, as do the clients it is not given to.
var clientLogs = newClientLog(slog.New(slog.DiscardHandler))

// routeClientLogs points every client's own logger at clientLogs, whose
// lines go to stderr as text records at level Warn until a command gives
// its own logger. It sets process-wide state of those libraries, so only
// main calls it, once, before any command runs; tests that call run do
// not.
func routeClientLogs(stderr io.Writer) {
	clientLogs.use(slog.New(slog.NewTextHandler(&stderrWriter{w: stderr}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	l := slog.New(clientLogs)
	window.SetLogger(l)
	mysql.SetLogger(l)
	relay.SetLogger(l)
	log.SetFlags(0)
	log.SetOutput(&logLines{l: l})
}

// clientLog is a slog.Handler that passes the clients' records on to the
// logger of the command that runs, holding back the repeats.
type clientLog struct {
	target atomic.Pointer[slog.Logger]
	now    func() time.Time
	every  time.Duration

	mu   sync.Mutex
	seen map[string]*repeats
}

// repeats is what clientLog remembers of one distinct line.
type repeats struct {
	logged time.Time   // when it was last let through
	held   int         // how many since were held back
	last   slog.Record // the last one held back, for flush
}

func newClientLog(target *slog.Logger) *clientLog {
	c := &clientLog{now: time.Now, every: clientLogEvery, seen: map[string]*repeats{}}
	c.target.Store(target)
	return c
}

// use makes l the logger the clients' lines go to from now on: the
// command's own, in its format and at its level.
func (c *clientLog) use(l *slog.Logger) { c.target.Store(l) }

func (c *clientLog) Enabled(ctx context.Context, level slog.Level) bool {
	return c.target.Load().Enabled(ctx, level)
}

func (c *clientLog) Handle(ctx context.Context, r slog.Record) error {
	return c.handle(ctx, r, c.target.Load().Handler())
}

// handle hands r on to next, unless a line like it was let through less
// than c.every ago: then it is held back and counted.
func (c *clientLog) handle(ctx context.Context, r slog.Record, next slog.Handler) error {
	key := clientKey(r)
	now := c.now()
	c.mu.Lock()
	rep := c.seen[key]
	if rep != nil && now.Sub(rep.logged) < c.every {
		rep.held++
		rep.last = r.Clone()
		c.mu.Unlock()
		return nil
	}
	held := 0
	if rep != nil {
		held = rep.held
	}
	if len(c.seen) >= 1000 {
		// A client that puts a new word in every line would grow the map
		// without end: forget the lines whose interval is over.
		for k, v := range c.seen {
			if now.Sub(v.logged) >= c.every {
				delete(c.seen, k)
			}
		}
	}
	c.seen[key] = &repeats{logged: now}
	c.mu.Unlock()
	if held > 0 {
		r.AddAttrs(slog.Int("suppressed", held))
	}
	return next.Handle(ctx, r)
}

// flush reports the lines still held back, so that a run's end does not
// swallow them: for each distinct line, one record of its last text, at
// the time of the flush, whose suppressed=N counts the lines it stands
// for.
func (c *clientLog) flush() {
	c.mu.Lock()
	var held []slog.Record
	now := c.now()
	for k, v := range c.seen {
		if v.held > 0 {
			r := slog.NewRecord(now, v.last.Level, v.last.Message, v.last.PC)
			v.last.Attrs(func(a slog.Attr) bool { r.AddAttrs(a); return true })
			r.AddAttrs(slog.Int("suppressed", v.held))
			held = append(held, r)
		}
		delete(c.seen, k)
	}
	c.mu.Unlock()
	h := c.target.Load().Handler()
	for _, r := range held {
		_ = h.Handle(context.Background(), r) // stderr's failure has nowhere to go
	}
}

// WithAttrs and WithGroup are not used by the clients' adapters, which
// log their attributes with each record; they apply to the target in
// force at each record.
func (c *clientLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &derivedHandler{c: c, apply: func(h slog.Handler) slog.Handler { return h.WithAttrs(as) }}
}

func (c *clientLog) WithGroup(name string) slog.Handler {
	return &derivedHandler{c: c, apply: func(h slog.Handler) slog.Handler { return h.WithGroup(name) }}
}

// derivedHandler is clientLog with attributes or a group, applied to the
// target's handler at each record, after the repeats are held back.
type derivedHandler struct {
	c     *clientLog
	apply func(slog.Handler) slog.Handler
}

func (d *derivedHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return d.c.Enabled(ctx, level)
}

func (d *derivedHandler) Handle(ctx context.Context, r slog.Record) error {
	return d.c.handle(ctx, r, d.apply(d.c.target.Load().Handler()))
}

func (d *derivedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &derivedHandler{c: d.c, apply: func(h slog.Handler) slog.Handler { return d.apply(h).WithAttrs(as) }}
}

func (d *derivedHandler) WithGroup(name string) slog.Handler {
	return &derivedHandler{c: d.c, apply: func(h slog.Handler) slog.Handler { return d.apply(h).WithGroup(name) }}
}

// clientKey is what makes two lines of a client the same: the client and
// the text with its digits left out, so that "failed to dial after 3
// attempts: dial tcp 127.0.0.1:6379" and the same after 5 attempts, or a
// line naming another local port, count as one.
func clientKey(r slog.Record) string {
	var b strings.Builder
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "client" {
			b.WriteString(a.Value.String())
			return false
		}
		return true
	})
	b.WriteByte(' ')
	for _, c := range r.Message {
		if c < '0' || c > '9' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// logLines is the standard log package's output as records of l, one a
// line, at level Warn with client=log.
type logLines struct {
	l   *slog.Logger
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *logLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil { // no newline yet: keep the start for the next write
			w.buf.WriteString(line)
			return len(p), nil
		}
		if line = strings.TrimSpace(line); line != "" {
			w.l.Warn(line, "client", "log")
		}
	}
}
