package spool_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// flakyLeases is a SQLite ledger made to keep leases, in memory, the way
// a shared PostgreSQL or MariaDB ledger does, whose AcquireSessionLease
// fails while down is set: a database restarting or failing over, or the
// consumer's role locked, at the moment a session starts.
type flakyLeases struct {
	ledger.Consumer
	mu       sync.Mutex
	down     bool
	acquired int
}

func (l *flakyLeases) HoldsLeases() bool { return true }

func (l *flakyLeases) AcquireSessionLease(context.Context, string, time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		return errors.New("acquire lease: FATAL: terminating connection due to administrator command (SQLSTATE 57P01)")
	}
	l.acquired++
	return nil
}

func (l *flakyLeases) set(down bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down = down
}

func (l *flakyLeases) RenewSessionLease(context.Context, string, time.Duration) error { return nil }
func (l *flakyLeases) TakeOverSessionLease(context.Context, string) (spool.LeaseState, error) {
	return spool.LeaseUnknown, nil
}
func (l *flakyLeases) DropSessionLease(context.Context, string) error { return nil }

// syncBuffer is a log destination read while the consumer writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestWatchWaitsForLedgerAtSessionStart: a watching consumer whose ledger
// does not take a new session's lease (here its first) waits for the
// ledger, saying so once, instead of exiting; once the ledger takes the
// lease it consumes. A drain that cannot start fails at once, its cron
// being the retry.
func TestWatchWaitsForLedgerAtSessionStart(t *testing.T) {
	f := newFixture(t, nil)
	l := &flakyLeases{Consumer: f.ledger.Consumer(), down: true}

	c, err := spool.NewConsumer(f.dir, l, spool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Drain(context.Background()); err == nil || !strings.Contains(err.Error(), "lease") {
		t.Errorf("a drain whose ledger takes no lease: %v, want its error", err)
	}

	var logs syncBuffer
	c, err = spool.NewConsumer(f.dir, l, spool.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		st  spool.Stats
		err error
	}
	out := make(chan result, 1)
	go func() { st, err := c.Watch(ctx); out <- result{st, err} }()

	// Three tries, a second apart, all refused.
	select {
	case r := <-out:
		t.Fatalf("the watch ended while the ledger took no lease: %+v, %v; want it waiting", r.st, r.err)
	case <-time.After(2500 * time.Millisecond):
	}
	if n := strings.Count(logs.String(), "waiting for the ledger"); n != 1 {
		t.Errorf("the wait was logged %d times, want once:\n%s", n, logs.String())
	}
	l.set(false)
	if _, err := f.dir.WriteFile(queue.Inbox, "a.json", []byte(msg("a", "A", 1))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for f.count(t, queue.Done) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("a.json not consumed once the ledger took the lease; log:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	r := <-out
	if r.err != nil || r.st.Processed != 1 {
		t.Errorf("the watch: %+v, %v; want a.json processed and a clean stop", r.st, r.err)
	}
	if !strings.Contains(logs.String(), "the ledger answers again") {
		t.Errorf("the recovery was not logged:\n%s", logs.String())
	}
}
