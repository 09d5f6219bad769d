package spool_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
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
	c, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), spool.Config{Caller: caller, Concurrency: 4, Ordered: true})
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

// boundCaller is a Caller with a call bound (spool.TimeoutCaller).
type boundCaller struct {
	spool.CallerFunc
	bound time.Duration
}

func (c boundCaller) CallTimeout() time.Duration { return c.bound }

// lockingCaller is a Caller whose calls hold the calls lock
// (spool.LockingCaller).
type lockingCaller struct{ boundCaller }

func (lockingCaller) HoldsCallsLock() bool { return true }

// calledAt records when each msg_id was called.
type calledAt struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (c *calledAt) call(_ context.Context, d *spool.Delivery) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil {
		c.at = map[string][]time.Time{}
	}
	c.at[d.Message.MsgID] = append(c.at[d.Message.MsgID], time.Now())
	return nil
}

func (c *calledAt) calls() (n int, ids map[string][]time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids = map[string][]time.Time{}
	for id, at := range c.at {
		n += len(at)
		ids[id] = slices.Clone(at)
	}
	return n, ids
}

// stopCut runs a Drain of f with caller, 4 calls at once, and stops it
// once 4 calls have started, with a shutdown timeout that cuts them
// short. It returns the msg_ids of the calls cut.
func stopCut(t *testing.T, f *fixture, caller spool.Caller, started <-chan string) map[string]bool {
	t.Helper()
	c, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), spool.Config{Caller: caller, Concurrency: 4, ShutdownTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Drain(ctx)
		done <- err
	}()
	cut := map[string]bool{}
	for range 4 {
		cut[<-started] = true
	}
	cancel()
	if err := <-done; !errors.Is(err, spool.ErrShutdownTimeout) {
		t.Fatalf("Drain returned %v, want ErrShutdownTimeout", err)
	}
	return cut
}

// requireCutHeld checks what a stop that cut calls short leaves: their
// claims in processing/ and their msg_ids reserved, as a kill leaves them,
// every other message back in inbox/, nothing recorded.
func (f *fixture) requireCutHeld(t *testing.T, n, cut int) {
	t.Helper()
	if got := f.count(t, queue.Processing); got != cut {
		t.Errorf("processing/ holds %d, want the %d claims of the calls cut short", got, cut)
	}
	if got := f.scalar(t, `SELECT COUNT(*) FROM reservations`); got != cut {
		t.Errorf("%d reservations left, want the %d of the calls cut short", got, cut)
	}
	if in := f.count(t, queue.Inbox); in != n-cut {
		t.Errorf("inbox/ holds %d, want %d: the claims never called given back", in, n-cut)
	}
	for _, table := range []string{"deliveries", "attempts", "processed"} {
		if got := f.scalar(t, `SELECT COUNT(*) FROM `+table); got != 0 {
			t.Errorf("%d rows in %s, want none", got, table)
		}
	}
}

// TestStopTimeoutHoldsCut: calls that outlast ShutdownTimeout are
// cancelled and held for recovery exactly as a kill holds them, since what
// they started may still run; Drain says so. The next consumer calls
// every other message at once, and the msg_ids cut short only once the
// stopped consumer's call bound, recorded with their reservations, has
// passed since it found them, however shorter its own (the Caller holds
// no calls lock that could prove them gone sooner); each is processed
// once.
func TestStopTimeoutHoldsCut(t *testing.T) {
	const n = 20
	const bound = 2 * time.Second // the stopped consumer's: far beyond its 50 ms stop
	f := stopFixture(t, n)
	started := make(chan string, n)
	cut := stopCut(t, f, boundCaller{func(ctx context.Context, d *spool.Delivery) error {
		started <- d.Message.MsgID
		<-ctx.Done()
		return ctx.Err()
	}, bound}, started)
	f.requireCutHeld(t, n, len(cut))

	var rec calledAt
	c, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), spool.Config{Caller: boundCaller{rec.call, 300 * time.Millisecond}, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	restart := time.Now()
	st, err := c.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Processed != n || st.Recovered != len(cut) {
		t.Errorf("the next drain processed %d, recovered %d; want %d and %d", st.Processed, st.Recovered, n, len(cut))
	}
	calls, at := rec.calls()
	if calls != n {
		t.Errorf("%d calls, want one per msg_id, %d", calls, n)
	}
	for id := range cut {
		if len(at[id]) == 1 && at[id][0].Sub(restart) < bound {
			t.Errorf("%s, cut short, was called again %v after the restart, before the stopped consumer's call bound (%v)", id, at[id][0].Sub(restart), bound)
		}
	}
	f.requireStopped(t, n, n)
}

// TestStopTimeoutHoldsWhileLocked: a call cut short leaves a process
// running that holds the session's calls lock (it left the call's process
// group, say). The next consumer holds its msg_id for as long as the
// process lives, however far the call bound, and calls it again as soon
// as the process is gone.
func TestStopTimeoutHoldsWhileLocked(t *testing.T) {
	const n = 8
	f := stopFixture(t, n)
	started := make(chan string, n)
	var mu sync.Mutex
	var left []*exec.Cmd
	t.Cleanup(func() {
		for _, p := range left {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	})
	cut := stopCut(t, f, lockingCaller{boundCaller{func(ctx context.Context, d *spool.Delivery) error {
		lock := d.CallsLock
		if lock == nil {
			return errors.New("no calls lock given to a call")
		}
		p := exec.Command("sleep", "60")
		p.ExtraFiles = []*os.File{lock}
		if err := p.Start(); err != nil {
			return err
		}
		mu.Lock()
		left = append(left, p)
		mu.Unlock()
		started <- d.Message.MsgID
		<-ctx.Done()
		return ctx.Err()
	}, time.Minute}}, started)
	f.requireCutHeld(t, n, len(cut))

	var rec calledAt
	holding := make(chan struct{})
	log := slog.New(&onMessage{prefix: "holding the msg_ids", do: func() { close(holding) }})
	c, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), spool.Config{Caller: lockingCaller{boundCaller{rec.call, time.Minute}},
		Concurrency: 4, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	type ran struct {
		st  spool.Stats
		err error
	}
	out := make(chan ran, 1)
	go func() {
		st, err := c.Drain(context.Background())
		out <- ran{st, err}
	}()
	select {
	case <-holding:
	case <-time.After(time.Minute):
		t.Fatal("the restart does not say it holds the msg_ids of the calls cut short")
	}
	// The others are called meanwhile, in the passes that find the held
	// ones reserved.
	deadline := time.Now().Add(time.Minute)
	for calls, _ := rec.calls(); calls < n-len(cut); calls, _ = rec.calls() {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls a minute after the restart, want the %d never called", calls, n-len(cut))
		}
		time.Sleep(5 * time.Millisecond) // polling, with a deadline
	}
	_, at := rec.calls()
	for id := range cut {
		if len(at[id]) > 0 {
			t.Errorf("%s was called again while a process of its first call holds the calls lock", id)
		}
	}
	mu.Lock()
	for _, p := range left {
		_ = p.Process.Kill()
		_ = p.Wait()
	}
	left = nil
	mu.Unlock()
	killed := time.Now()
	r := <-out
	if r.err != nil || r.st.Processed != n {
		t.Fatalf("the next drain: processed %d, %v; want %d", r.st.Processed, r.err, n)
	}
	if waited := time.Since(killed); waited > 30*time.Second {
		t.Errorf("the held msg_ids were called %v after the lock was freed, want at once", waited)
	}
	f.requireStopped(t, n, n)
	if _, err := os.Stat(filepath.Join(f.dir.Path(), queue.CallsLockDir)); err == nil {
		if ents, _ := os.ReadDir(filepath.Join(f.dir.Path(), queue.CallsLockDir)); len(ents) > 0 {
			t.Errorf("calls locks left: %v", ents)
		}
	}
}
