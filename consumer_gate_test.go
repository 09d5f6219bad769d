package spool

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestGateBackoffNoOverflow: the pause after many rounds of failures is
// the retry policy's cap, never an overflowed shift (which was negative:
// no pause at all, however long the failures went on).
func TestGateBackoffNoOverflow(t *testing.T) {
	g := newGate(Config{PauseAfter: 1, Retry: Retry{Base: 3 * time.Hour, Cap: 24 * time.Hour}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	g.rounds = 20 // twenty pauses in a row already: 3h << 20 overflows
	before := time.Now()
	g.observe(errors.New("down"))
	if got := g.until.Sub(before); got < 23*time.Hour || got > 25*time.Hour {
		t.Errorf("pause of %v after 21 rounds, want the cap, 24h", got)
	}
}

// TestBackoffBound: min(limit, base << n) for every n, with no overflow.
func TestBackoffBound(t *testing.T) {
	for _, tt := range []struct {
		base, limit time.Duration
		n           int
		want        time.Duration
	}{
		{time.Second, 5 * time.Minute, 0, time.Second},
		{time.Second, 5 * time.Minute, 3, 8 * time.Second},
		{time.Second, 5 * time.Minute, 9, 5 * time.Minute},
		{time.Second, 5 * time.Minute, 50, 5 * time.Minute},
		{time.Second, 5 * time.Minute, 70, 5 * time.Minute},
		{3 * time.Hour, 24 * time.Hour, 20, 24 * time.Hour},
		{1 << 62, 1 << 62, 1, 1 << 62},
		{time.Second, 5 * time.Minute, -1, time.Second},
	} {
		if got := backoffBound(tt.base, tt.limit, tt.n); got != tt.want {
			t.Errorf("backoffBound(%v, %v, %d) = %v, want %v", tt.base, tt.limit, tt.n, got, tt.want)
		}
	}
}
