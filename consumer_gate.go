package spool

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultPauseAfter is Config.PauseAfter when it is zero.
const DefaultPauseAfter = 10

// gate paces a consumer's calls to the downstream: at most Config.Rate
// calls a second (a token bucket of one), and none at all during a pause.
// A pause begins when a call fails with a RetryAfterError (an HTTP 429 or
// 503 with Retry-After: the downstream said how long), for that long, or
// after PauseAfter transient failures in a row, for the retry policy's
// delay of that many rounds. A throttled or failing downstream then stops
// getting Concurrency calls at once; only the calls already in flight
// finish. The pause is logged when it begins, not once per message.
type gate struct {
	limiter *rate.Limiter // nil: no rate
	after   int
	retry   Retry
	log     *slog.Logger

	mu     sync.Mutex
	until  time.Time
	failed int // transient failures in a row
	rounds int // pauses in a row for failures, for the backoff
}

func newGate(cfg Config, log *slog.Logger) *gate {
	g := &gate{after: cfg.PauseAfter, retry: cfg.Retry.withDefaults(), log: log}
	if cfg.Rate > 0 {
		g.limiter = rate.NewLimiter(rate.Limit(cfg.Rate), 1)
	}
	return g
}

// wait returns when a call may start: after any pause, and within the rate.
// Its only error is ctx's, once ctx is done: a wait is never a failure of
// the call it precedes. (rate.Limiter.Wait fails at once when ctx's
// deadline is nearer than the next token; a consumer whose context has a
// deadline must then stop at that deadline, not count an attempt.)
func (g *gate) wait(ctx context.Context) error {
	for {
		g.mu.Lock()
		d := time.Until(g.until)
		g.mu.Unlock()
		if d <= 0 {
			break
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	if g.limiter == nil {
		return nil
	}
	r := g.limiter.Reserve() // never refused: one token, a burst of one
	d := r.Delay()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		r.Cancel() // the token goes back to the bucket
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// observe learns from a call's outcome.
func (g *gate) observe(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ra *RetryAfterError
	switch {
	case err == nil:
		g.failed, g.rounds = 0, 0
		return
	case IsPermanent(err):
		return // the message is at fault, not the downstream
	case errors.As(err, &ra) && ra.After > 0:
		g.pause(ra.After, "the downstream asked to retry later", err)
		return
	}
	g.failed++
	if g.after > 0 && g.failed >= g.after {
		g.rounds++
		g.pause(backoffBound(g.retry.Base, g.retry.Cap, g.rounds-1), "transient failures in a row", err)
		g.failed = 0
	}
}

// pause stops new calls for d, unless a longer pause runs already.
func (g *gate) pause(d time.Duration, why string, err error) {
	until := time.Now().Add(d)
	if !until.After(g.until) {
		return
	}
	if time.Now().After(g.until) {
		g.log.Warn("calls paused", "for", d, "why", why, "failures", g.failed, "err", err)
	}
	g.until = until
}
