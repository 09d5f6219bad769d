package spool_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/queue"
)

// TestRateDeadlineCallsNothingTwice: a consumer with a Rate whose context
// has a deadline stops at the deadline; a message whose token would come
// after it is given back uncalled, not failed. (rate.Limiter.Wait fails at
// once when the deadline is nearer than the next token: that was taken
// for the call's failure, and such messages went to error/ as
// retries-exhausted without ever being called.)
func TestRateDeadlineCallsNothingTwice(t *testing.T) {
	msgs := map[string]string{}
	for i := range 3 {
		msgs[fmt.Sprintf("m%d.json", i)] = msg(fmt.Sprintf("M%d", i), "O", i+1)
	}
	f := newFixture(t, msgs)
	var calls atomic.Int32
	caller := spool.CallerFunc(func(context.Context, *spool.Delivery) error {
		calls.Add(1)
		return nil
	})
	c, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), spool.Config{Caller: caller, Rate: 1, Concurrency: 4,
		Retry: spool.Retry{Base: time.Millisecond, Cap: time.Millisecond, MaxAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	// One token at once, the next a second later, the third after the deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	st, err := c.Drain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.DeadLetters != 0 || st.Retries != 0 || f.count(t, queue.Error) != 0 {
		t.Errorf("stats %+v, error/ %d: a message never called was failed", st, f.count(t, queue.Error))
	}
	if n := f.scalar(t, `SELECT COUNT(*) FROM attempts`); n != 0 {
		t.Errorf("%d attempts recorded, want none: every call succeeded", n)
	}
	if got := int(calls.Load()); got != st.Processed || got == 0 || got == 3 {
		t.Errorf("%d calls, %d processed; want the calls the rate allowed before the deadline (1 or 2), each processed", got, st.Processed)
	}
	if in, done := f.count(t, queue.Inbox), f.count(t, queue.Done); in+done != 3 || f.count(t, queue.Processing) != 0 {
		t.Errorf("inbox/ %d, done/ %d, processing/ %d: want the uncalled back in inbox/", in, done, f.count(t, queue.Processing))
	}
}

// TestConcurrentRunsRefused: a second Drain or Watch on a Consumer that is
// running one is refused at once with ErrAlreadyRunning, and the first
// goes on unharmed (the claims waiting for a retry are the run's: two runs
// at once released and abandoned each other's, and both failed).
func TestConcurrentRunsRefused(t *testing.T) {
	msgs := map[string]string{}
	for i := range 20 {
		msgs[fmt.Sprintf("m%02d.json", i)] = msg(fmt.Sprintf("M%02d", i), "O", i+1)
	}
	f := newFixture(t, msgs)
	var failed sync.Map
	started := make(chan struct{})
	var once sync.Once
	caller := spool.CallerFunc(func(_ context.Context, d *spool.Delivery) error {
		once.Do(func() { close(started) })
		if _, again := failed.LoadOrStore(d.Message.MsgID, true); !again {
			return errors.New("try again") // each message waits for one retry
		}
		return nil
	})
	c, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), spool.Config{Caller: caller,
		Retry: spool.Retry{Base: 20 * time.Millisecond, Cap: 20 * time.Millisecond, NoJitter: true}})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		st  spool.Stats
		err error
	}
	first := make(chan result, 1)
	go func() { st, err := c.Drain(context.Background()); first <- result{st, err} }()
	<-started
	_, err = c.Drain(context.Background())
	if !errors.Is(err, spool.ErrAlreadyRunning) {
		t.Errorf("a second Drain while one runs: %v, want ErrAlreadyRunning", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Watch(ctx); !errors.Is(err, spool.ErrAlreadyRunning) {
		t.Errorf("a Watch while a Drain runs: %v, want ErrAlreadyRunning", err)
	}
	r := <-first
	if r.err != nil {
		t.Fatalf("the first Drain: %v", r.err)
	}
	if r.st.Processed != 20 || f.count(t, queue.Done) != 20 || f.count(t, queue.Processing) != 0 {
		t.Errorf("the first Drain: %+v, done/ %d, processing/ %d; want all 20 processed", r.st, f.count(t, queue.Done), f.count(t, queue.Processing))
	}
	// Once it has returned, the Consumer runs again.
	if _, err := c.Drain(context.Background()); err != nil {
		t.Errorf("a Drain after the first returned: %v", err)
	}
}

// TestLeaseRenewalFailureHoldsCalls: while the session's lease cannot be
// renewed, no call starts (and nothing is claimed); once it is renewed
// again, consumption resumes and finishes. The renewal is made to fail by
// moving the session's directory away (to a dot-name recovery skips); the
// consumer works through its descriptor meanwhile, as it does on a
// network filesystem whose server stopped answering attribute updates.
func TestLeaseRenewalFailureHoldsCalls(t *testing.T) {
	const n = 30
	msgs := map[string]string{}
	for i := range n {
		msgs[fmt.Sprintf("m%02d.json", i)] = msg(fmt.Sprintf("M%02d", i), "O", i+1)
	}
	f := newFixture(t, msgs)
	lost := make(chan struct{})
	log := slog.New(&onMessage{prefix: "lease renewal failed", do: func() { close(lost) }})
	proc := f.dir.StagePath(queue.Processing)
	var calls, during atomic.Int32
	var away atomic.Bool
	var session atomic.Value
	caller := spool.CallerFunc(func(_ context.Context, d *spool.Delivery) error {
		if calls.Add(1) == 1 {
			session.Store(d.Consumer)
			if err := os.Rename(filepath.Join(proc, d.Consumer), filepath.Join(proc, ".away")); err != nil {
				return spool.Permanent(err)
			}
			away.Store(true)
			select {
			case <-lost:
			case <-time.After(30 * time.Second):
				return spool.Permanent(errors.New("the renewal never failed"))
			}
			return nil
		}
		if away.Load() {
			during.Add(1)
		}
		return nil
	})
	c, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), spool.Config{Caller: caller, Concurrency: 1,
		Lease: 300 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		st  spool.Stats
		err error
	}
	out := make(chan result, 1)
	go func() { st, err := c.Drain(context.Background()); out <- result{st, err} }()
	select {
	case <-lost:
	case r := <-out:
		t.Fatalf("the Drain ended before its lease renewal failed: %+v, %v", r.st, r.err)
	}
	// Several renewal intervals (100 ms) with the lease lost.
	time.Sleep(500 * time.Millisecond)
	away.Store(false)
	if err := os.Rename(filepath.Join(proc, ".away"), filepath.Join(proc, session.Load().(string))); err != nil {
		t.Fatal(err)
	}
	r := <-out
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := during.Load(); got != 0 {
		t.Errorf("%d calls started while the lease could not be renewed, want none", got)
	}
	if r.st.Processed != n || f.count(t, queue.Done) != n {
		t.Errorf("after the lease was renewed: %+v, done/ %d; want all %d processed", r.st, f.count(t, queue.Done), n)
	}
}

// onMessage is a slog.Handler that runs do once, at the first record
// whose message begins with prefix.
type onMessage struct {
	prefix string
	do     func()
	once   sync.Once
}

func (h *onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h *onMessage) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.once.Do(h.do)
	}
	return nil
}
func (h *onMessage) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *onMessage) WithGroup(string) slog.Handler      { return h }
