package spool_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/queue"
)

// stopFixture is a queue of n messages over 4 order keys.
func stopFixture(t *testing.T, n int) *fixture {
	t.Helper()
	msgs := map[string]string{}
	for i := range n {
		msgs[fmt.Sprintf("m%03d.json", i)] = msg(fmt.Sprintf("m%03d", i), fmt.Sprintf("O%d", i%4), i/4+1)
	}
	return newFixture(t, msgs)
}

// requireStopped checks what every graceful stop leaves: processing/ empty,
// no reservation and no attempt in the ledger, and inbox/ holding what was
// not processed.
func (f *fixture) requireStopped(t *testing.T, n, processed int) {
	t.Helper()
	if got := f.count(t, queue.Processing); got != 0 {
		t.Errorf("processing/ holds %d, want nothing", got)
	}
	if got := f.scalar(t, `SELECT COUNT(*) FROM reservations`); got != 0 {
		t.Errorf("%d reservations left, want none", got)
	}
	if got := f.scalar(t, `SELECT COUNT(*) FROM attempts`); got != 0 {
		t.Errorf("%d attempts counted, want none", got)
	}
	if got := f.scalar(t, `SELECT COUNT(*) FROM processed`); got != processed {
		t.Errorf("%d processed, want %d", got, processed)
	}
	if in, done := f.count(t, queue.Inbox), f.count(t, queue.Done); in != n-processed || done != processed {
		t.Errorf("inbox/ %d, done/ %d; want %d and %d", in, done, n-processed, processed)
	}
}

// TestStopGivesBackUncalled: a stop while 4 ordered calls are in flight
// finishes and commits those 4, and gives back every other claim, reserved
// and waiting for its key or a slot, uncalled.
func TestStopGivesBackUncalled(t *testing.T) {
	const n = 40
	f := stopFixture(t, n)
	started := make(chan struct{}, n)
	finish := make(chan struct{})
	var calls atomic.Int64
	caller := spool.CallerFunc(func(ctx context.Context, d *spool.Delivery) error {
		calls.Add(1)
		started <- struct{}{}
		<-finish
		return nil
	})
	c, err := spool.NewConsumer(f.dir, f.ledger, spool.Config{Caller: caller, Concurrency: 4, Ordered: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	type ran struct {
		st  spool.Stats
		err error
	}
	out := make(chan ran, 1)
	go func() {
		st, err := c.Drain(ctx)
		out <- ran{st, err}
	}()
	for range 4 {
		<-started
	}
	cancel()
	close(finish)
	r := <-out
	if r.err != nil {
		t.Fatalf("a graceful stop returned %v", r.err)
	}
	if got := calls.Load(); got != 4 || r.st.Processed != 4 {
		t.Errorf("%d calls made, %d processed; want the 4 in flight", got, r.st.Processed)
	}
	f.requireStopped(t, n, 4)
}

// TestStopTimeoutCancels: calls that outlast ShutdownTimeout are cancelled
// and given back, nothing recorded of them, and Drain says so.
func TestStopTimeoutCancels(t *testing.T) {
	const n = 20
	f := stopFixture(t, n)
	started := make(chan struct{}, n)
	caller := spool.CallerFunc(func(ctx context.Context, d *spool.Delivery) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	c, err := spool.NewConsumer(f.dir, f.ledger, spool.Config{Caller: caller, Concurrency: 4, ShutdownTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Drain(ctx)
		done <- err
	}()
	for range 4 {
		<-started
	}
	cancel()
	if err := <-done; !errors.Is(err, spool.ErrShutdownTimeout) {
		t.Fatalf("Drain returned %v, want ErrShutdownTimeout", err)
	}
	f.requireStopped(t, n, 0)
	if got := f.scalar(t, `SELECT COUNT(*) FROM deliveries`); got != 0 {
		t.Errorf("%d deliveries recorded, want none", got)
	}
}
