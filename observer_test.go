package spool_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
)

// recorder is an Observer that keeps what it was told.
type recorder struct {
	spool.NopObserver
	mu        sync.Mutex
	delivered map[spool.Outcome]int
	committed int // deliveries in committed transactions
	commits   int
	called    map[string]int // "kind/result"
	recovered int
}

func newRecorder() *recorder {
	return &recorder{delivered: map[spool.Outcome]int{}, called: map[string]int{}}
}

func (r *recorder) Delivered(_ *spool.Delivery, res spool.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delivered[res.Outcome]++
}

func (r *recorder) Committed(n int, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.committed += n
	r.commits++
}

func (r *recorder) Called(kind, result string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.called[kind+"/"+result]++
}

func (r *recorder) Recovered(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recovered += n
}

// kindCaller is a Caller of kind "test" that fails the messages of order
// "bad" for good and times out on order "slow".
type kindCaller struct{}

func (kindCaller) Kind() string { return "test" }
func (kindCaller) Call(_ context.Context, d *spool.Delivery) error {
	switch d.Message.OrderNo {
	case "bad":
		return spool.Permanent(errors.New("refused"))
	case "slow":
		return context.DeadlineExceeded
	}
	return nil
}

// TestObserver: the Observer hears of every delivery once, with its
// outcome, of the deliveries the commits carried, and of every call with
// its handler's kind and result, on the three paths (no handler, a
// Handler in the transaction, a Caller outside it).
func TestObserver(t *testing.T) {
	msgs := map[string]string{
		"a.json": msg("a", "A", 1), "a2.json": msg("a", "A", 1), "b.json": msg("b", "bad", 1),
		"c.json": msg("c", "slow", 1), "p.json": "{nope",
	}
	handler := spool.HandlerFunc(func(ctx context.Context, tx *sql.Tx, d *spool.Delivery) error {
		if d.Message.OrderNo == "bad" {
			return spool.Permanent(errors.New("refused"))
		}
		if d.Message.OrderNo == "slow" {
			return spool.Permanent(context.DeadlineExceeded)
		}
		return nil
	})
	for _, tc := range []struct {
		name   string
		cfg    spool.Config
		called map[string]int
		dead   int
	}{
		{"Record", spool.Config{}, map[string]int{}, 1},
		{"Handler", spool.Config{Handler: handler}, map[string]int{"go/ok": 1, "go/permanent": 2}, 3},
		{"Caller", spool.Config{Caller: kindCaller{}, Retry: spool.Retry{MaxAttempts: 1}},
			map[string]int{"test/ok": 1, "test/permanent": 1, "test/timeout": 1}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, msgs)
			rec := newRecorder()
			cfg := tc.cfg
			cfg.Observer, cfg.BatchSize = rec, 1 // one batch a message: a2 is a duplicate of a
			c, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			st, err := c.Drain(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			want := map[spool.Outcome]int{spool.OutcomeDuplicate: 1, spool.OutcomeDeadLetter: tc.dead}
			if tc.dead < 3 {
				want[spool.OutcomeProcessed] = 3
			} else {
				want[spool.OutcomeProcessed] = 1
			}
			if len(rec.delivered) != len(want) || rec.delivered[spool.OutcomeProcessed] != want[spool.OutcomeProcessed] ||
				rec.delivered[spool.OutcomeDuplicate] != 1 || rec.delivered[spool.OutcomeDeadLetter] != tc.dead {
				t.Errorf("delivered %v, want %v (stats %+v)", rec.delivered, want, st)
			}
			if rec.committed < len(msgs) || rec.commits == 0 {
				t.Errorf("commits carried %d deliveries in %d commits, want at least %d", rec.committed, rec.commits, len(msgs))
			}
			if len(rec.called) != len(tc.called) {
				t.Errorf("called %v, want %v", rec.called, tc.called)
			}
			for k, n := range tc.called {
				if rec.called[k] != n {
					t.Errorf("called %v, want %v", rec.called, tc.called)
					break
				}
			}
		})
	}
}
