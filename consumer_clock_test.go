package spool_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// slowBacklog is a queue of n messages m000.json... and a handler that
// takes each 25 ms, so that one pass over them lasts n × 25 ms, and
// records the msg_ids in the order it handled them.
type slowBacklog struct {
	*fixture
	n       int
	mu      sync.Mutex
	handled []string
}

func newSlowBacklog(t *testing.T, n int) *slowBacklog {
	t.Helper()
	msgs := map[string]string{}
	for i := range n {
		msgs[fmt.Sprintf("m%03d.json", i)] = msg(fmt.Sprintf("M%03d", i), "O", i+1)
	}
	return &slowBacklog{fixture: newFixture(t, msgs), n: n}
}

func (b *slowBacklog) handle(ctx context.Context, _ *sql.Tx, d *spool.Delivery) error {
	time.Sleep(25 * time.Millisecond) // the business work's duration, not a synchronisation
	b.mu.Lock()
	b.handled = append(b.handled, d.Message.MsgID)
	b.mu.Unlock()
	return nil
}

// calls is how many messages the handler has handled.
func (b *slowBacklog) calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.handled)
}

// deadSession puts k claims in the directory of a session of this host
// whose consumer died (no process holds its lock), as a kill -9 leaves it,
// and returns the directory. Their names, a0.json..., sort before the
// backlog's.
func (b *slowBacklog) deadSession(t *testing.T, k int) string {
	t.Helper()
	dir := filepath.Join(b.dir.StagePath(queue.Processing), "deadbeef0000-1@"+queue.Host())
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range k {
		body := msg(fmt.Sprintf("A%d", i), "O", 1000+i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("a%d.json", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRecoverDuringPass: claims that a consumer killed on this host left
// while this one runs a long pass are recovered on the recovery clock,
// within about a second, while the pass runs (not once it is over), and
// the pass itself takes them next, before the rest of the backlog; in a
// Drain and in a Watch alike.
func TestRecoverDuringPass(t *testing.T) {
	for _, watch := range []bool{false, true} {
		name := map[bool]string{false: "drain", true: "watch"}[watch]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const n, k = 120, 5 // a pass of 3 s at least; k claims of the dead consumer
			b := newSlowBacklog(t, n)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			started := make(chan struct{})
			c, err := spool.NewConsumer(b.dir, b.ledger.Consumer(), spool.Config{
				Handler: spool.HandlerFunc(b.handle), BatchSize: 5,
				// The consumer died after this one's first recovery.
				OnStart: func() { close(started) },
				OnDelivery: func(*spool.Delivery, spool.Result, string) {
					if watch && b.calls() == n+k {
						cancel()
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				st  spool.Stats
				err error
			}
			out := make(chan result, 1)
			go func() {
				run := c.Drain
				if watch {
					run = c.Watch
				}
				st, err := run(ctx)
				out <- result{st, err}
			}()
			<-started
			dead := b.deadSession(t, k)
			born := time.Now()
			deadline := born.Add(5 * time.Second)
			for {
				if _, err := os.Stat(dead); errors.Is(err, os.ErrNotExist) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the dead consumer's claims are still in processing/ %v later", time.Since(born).Round(time.Millisecond))
				}
				time.Sleep(10 * time.Millisecond) // polling, with a deadline
			}
			took, handled := time.Since(born), b.calls()
			if handled >= n {
				t.Errorf("the dead consumer's claims were recovered %v after its death, once the pass was over (%d of %d handled): want during the pass", took.Round(time.Millisecond), handled, n)
			}
			r := <-out
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.st.Recovered != k || r.st.Processed != n+k {
				t.Errorf("stats %+v, want %d processed, %d recovered", r.st, n+k, k)
			}
			if got := b.count(t, queue.Processing); got != 0 {
				t.Errorf("processing/ holds %d files, want none", got)
			}
			// The pass took the recovered claims next, not after the
			// backlog: the last of them before the backlog's last message.
			b.mu.Lock()
			order := slices.Clone(b.handled)
			b.mu.Unlock()
			lastDead := slices.IndexFunc(order, func(id string) bool { return id == fmt.Sprintf("A%d", k-1) })
			lastBacklog := slices.Index(order, fmt.Sprintf("M%03d", n-1))
			if lastDead < 0 || lastDead > lastBacklog {
				t.Errorf("the recovered messages were handled after the backlog (%d-th of %d; the backlog's last %d-th): the pass did not take them when they came back", lastDead, len(order), lastBacklog)
			}
			t.Logf("recovered %v after the death, with %d of %d handled", took.Round(time.Millisecond), handled, n)
		})
	}
}

// failingOutcomes is a ledger whose ClaimOutcome, which recovery asks about
// each orphaned claim, fails for the claims of the dead session.
type failingOutcomes struct {
	ledger.Consumer
}

var errOutcome = errors.New("the ledger failed")

func (l failingOutcomes) ClaimOutcome(ctx context.Context, claim, msgID string) (spool.Outcome, bool, error) {
	if strings.HasPrefix(claim, "deadbeef") {
		return "", false, errOutcome
	}
	return l.Consumer.ClaimOutcome(ctx, claim, msgID)
}

// TestRecoverClockFailureEndsRun: a recovery on the clock that fails ends
// the run with its error at once, as a recovery between passes does, its
// session's claims left for recovery; it is not dropped, nor does it wait
// for the pass to end. The next run recovers and finishes everything.
func TestRecoverClockFailureEndsRun(t *testing.T) {
	t.Parallel()
	const n, k = 120, 3
	b := newSlowBacklog(t, n)
	started := make(chan struct{})
	c, err := spool.NewConsumer(b.dir, failingOutcomes{b.ledger.Consumer()}, spool.Config{
		Handler: spool.HandlerFunc(b.handle), BatchSize: 5,
		OnStart: func() { close(started) },
	})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan error, 1)
	go func() {
		_, err := c.Drain(context.Background())
		out <- err
	}()
	<-started
	b.deadSession(t, k)
	var runErr error
	select {
	case runErr = <-out:
	case <-time.After(time.Minute):
		t.Fatal("the drain did not end")
	}
	if !errors.Is(runErr, errOutcome) {
		t.Fatalf("the drain ended with %v, want the recovery's failure", runErr)
	}
	if handled := b.calls(); handled >= n {
		t.Errorf("the drain failed once the pass was over (%d of %d handled): want the recovery's failure to end it at once", handled, n)
	}
	// The next run, on a ledger that answers, finishes everything.
	quick := spool.HandlerFunc(func(context.Context, *sql.Tx, *spool.Delivery) error { return nil })
	c2, err := spool.NewConsumer(b.dir, b.ledger.Consumer(), spool.Config{Handler: quick})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := b.scalar(t, `SELECT COUNT(*) FROM processed`); got != n+k {
		t.Errorf("%d processed, want %d", got, n+k)
	}
	if b.count(t, queue.Processing) != 0 || b.count(t, queue.Inbox) != 0 {
		t.Errorf("inbox/ %d, processing/ %d: want both empty", b.count(t, queue.Inbox), b.count(t, queue.Processing))
	}
}
