package spool_test

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/queue"
)

// TestDrainLeavesRetryNotDue: a drain whose only work left is a retry due
// in an hour returns at once, the message back in inbox/ with its schedule
// in the ledger; the next drain holds it (no second attempt) and returns
// too; once due, a drain takes it. With RetryWait beyond the delay a drain
// waits for it instead.
func TestDrainLeavesRetryNotDue(t *testing.T) {
	f := newFixture(t, map[string]string{"a.json": msg("A", "O1", 1), "b.json": msg("B", "O1", 2)})
	var calls atomic.Int32
	fail := atomic.Bool{}
	fail.Store(true)
	h := spool.HandlerFunc(func(_ context.Context, _ *sql.Tx, d *spool.Delivery) error {
		if d.Message.MsgID == "A" {
			calls.Add(1)
			if fail.Load() {
				return errors.New("downstream down")
			}
		}
		return nil
	})
	cfg := spool.Config{Handler: h, Retry: spool.Retry{Base: time.Hour, Cap: time.Hour, MaxAttempts: 5, NoJitter: true}}
	drain := func() spool.Stats {
		t.Helper()
		c, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		st, err := c.Drain(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Fatalf("the drain took %v: it waited for the retry", took)
		}
		return st
	}
	st := drain()
	if st.Processed != 1 || st.Retries != 1 || st.Deferred != 1 {
		t.Fatalf("first drain: %+v, want B processed, A deferred", st)
	}
	if d := time.Until(st.NextRetry); d < 59*time.Minute || d > time.Hour {
		t.Errorf("NextRetry in %v, want about an hour", d)
	}
	if f.count(t, queue.Inbox) != 1 || f.count(t, queue.Processing) != 0 {
		t.Fatalf("inbox=%d processing=%d, want A back in inbox/ and no claim left", f.count(t, queue.Inbox), f.count(t, queue.Processing))
	}
	st = drain()
	if calls.Load() != 1 || st.Deferred != 1 || st.Retries != 0 {
		t.Fatalf("second drain: %+v after %d calls, want A held, not tried again", st, calls.Load())
	}
	if f.scalar(t, `SELECT attempts FROM attempts WHERE msg_id = 'A'`) != 1 {
		t.Fatal("the attempt count changed")
	}
	fail.Store(false)
	if _, err := f.ledger.SQL().Exec(`UPDATE attempts SET next_at = '2000-01-01T00:00:00.000000Z'`); err != nil {
		t.Fatal(err)
	}
	if st = drain(); st.Processed != 1 || st.Deferred != 0 || f.count(t, queue.Done) != 2 {
		t.Fatalf("drain once due: %+v, done/ %d, want A processed", st, f.count(t, queue.Done))
	}

	// RetryWait: a drain waits for the retries due within it.
	g := newFixture(t, map[string]string{"c.json": msg("C", "O2", 1)})
	var n atomic.Int32
	c, err := spool.NewConsumer(g.dir, g.ledger.Consumer(), spool.Config{RetryWait: time.Minute,
		Handler: spool.HandlerFunc(func(context.Context, *sql.Tx, *spool.Delivery) error {
			if n.Add(1) == 1 {
				return errors.New("once")
			}
			return nil
		}),
		Retry: spool.Retry{Base: 50 * time.Millisecond, Cap: 50 * time.Millisecond, MaxAttempts: 5, NoJitter: true}})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.Drain(context.Background()); err != nil || st.Processed != 1 || st.Deferred != 0 {
		t.Fatalf("drain with RetryWait: %+v, %v; want C retried and processed in the drain", st, err)
	}
}
