// Package clientlog routes the lines the client libraries a program links
// write of their own (go-redis on every failed dial, the MySQL driver on
// every dead connection, nats.go on an asynchronous error, the standard
// log package) into the program's logger, holding back the repeats: left
// to themselves they print plain text on stderr, which breaks a JSON log's
// promise that every line is one object, and repeat themselves (sixteen
// "failed to dial" lines in a five-second outage). Each record keeps its
// client=NAME attribute; one line of each distinct text, its numbers
// aside, is let through every interval, the next saying how many were
// held back (suppressed=N), and what is held at the end is said by Flush.
package clientlog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Router is a slog.Handler that passes the clients' records on to the
// logger in use (Use), holding back the repeats: one record of each
// distinct line (Key) is let through every interval, the next carrying
// suppressed=N, the count held back meanwhile; Flush says what is still
// held. It is safe for concurrent use.
type Router struct {
	target atomic.Pointer[slog.Logger]
	now    func() time.Time
	every  time.Duration

	mu   sync.Mutex
	seen map[string]*repeats
}

// repeats is what Router remembers of one distinct line.
type repeats struct {
	logged time.Time   // when it was last let through
	held   int         // how many since were held back
	last   slog.Record // the last one held back, for flush
}

// New returns a Router to target that lets one record of each distinct
// line through every interval.
func New(target *slog.Logger, every time.Duration) *Router {
	c := &Router{now: time.Now, every: every, seen: map[string]*repeats{}}
	c.target.Store(target)
	return c
}

// Use makes l the logger the clients' lines go to from now on: the
// command's own, in its format and at its level.
func (c *Router) Use(l *slog.Logger) { c.target.Store(l) }

// Enabled is the target's.
func (c *Router) Enabled(ctx context.Context, level slog.Level) bool {
	return c.target.Load().Enabled(ctx, level)
}

// Handle passes r on to the target, unless a line like it (Key) was let
// through less than the interval ago.
func (c *Router) Handle(ctx context.Context, r slog.Record) error {
	return c.handle(ctx, r, c.target.Load().Handler())
}

// handle hands r on to next, unless a line like it was let through less
// than c.every ago: then it is held back and counted.
func (c *Router) handle(ctx context.Context, r slog.Record, next slog.Handler) error {
	key := Key(r)
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

// Flush reports the lines still held back, so that a run's end does not
// swallow them: for each distinct line, one record of its last text, at
// the time of the flush, whose suppressed=N counts the lines it stands
// for.
func (c *Router) Flush() {
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

// WithAttrs applies as to the target in force at each record (the
// clients' adapters log their attributes with each record instead).
func (c *Router) WithAttrs(as []slog.Attr) slog.Handler {
	return &derivedHandler{c: c, apply: func(h slog.Handler) slog.Handler { return h.WithAttrs(as) }}
}

// WithGroup applies the group to the target in force at each record.
func (c *Router) WithGroup(name string) slog.Handler {
	return &derivedHandler{c: c, apply: func(h slog.Handler) slog.Handler { return h.WithGroup(name) }}
}

// derivedHandler is a Router with attributes or a group, applied to the
// target's handler at each record, after the repeats are held back.
type derivedHandler struct {
	c     *Router
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

// Key is what makes two lines of a client the same: the client and
// the text with its digits left out, so that "failed to dial after 3
// attempts: dial tcp 127.0.0.1:6379" and the same after 5 attempts, or a
// line naming another local port, count as one.
func Key(r slog.Record) string {
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

// LogLines is the standard log package's output (log.SetOutput) as
// records of L, one a line, at level Warn with client=log; a line written
// in pieces is one record once whole.
type LogLines struct {
	L   *slog.Logger
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write logs each whole line of p.
func (w *LogLines) Write(p []byte) (int, error) {
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
			w.L.Warn(line, "client", "log")
		}
	}
}
