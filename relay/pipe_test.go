package relay_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/relay"
)

// window is a Pipeline that acknowledges in order, from a goroutine of its
// own, what was handed to it, failing the events fail says to fail; check
// runs on each Send, before the event is taken.
type window struct {
	mu    sync.Mutex
	sent  []int64 // outbox ids, in the order handed over
	queue chan func()
	fail  func(e *relay.Event, attempt int) error
	tries map[int64]int
	check func(e *relay.Event)
}

func newWindow(fail func(e *relay.Event, attempt int) error) *window {
	w := &window{queue: make(chan func(), 1024), fail: fail, tries: map[int64]int{}}
	go func() {
		for f := range w.queue {
			time.Sleep(50 * time.Microsecond) // the broker's round trip: the window fills
			f()
		}
	}()
	return w
}

func (w *window) Send(_ context.Context, e *relay.Event, done func(error)) {
	if w.check != nil {
		w.check(e)
	}
	w.mu.Lock()
	w.sent = append(w.sent, e.Row.ID)
	w.tries[e.Row.ID]++
	err := w.fail(e, w.tries[e.Row.ID])
	w.mu.Unlock()
	w.queue <- func() { done(err) }
}

func (w *window) Window() int { return 16 }

func (w *window) Publish(ctx context.Context, e *relay.Event) error {
	res := make(chan error, 1)
	w.Send(ctx, e, func(err error) { res <- err })
	return <-res
}

func (w *window) Close() error { close(w.queue); return nil }

// outbox is a SQLite ledger whose outbox holds n rows of aggregate A.
func outbox(t *testing.T, n int) *ledger.DB {
	t.Helper()
	l, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for i := range n {
		if _, err := l.SQL().Exec(`INSERT INTO outbox (aggregate, type, payload) VALUES ('A', 't', ?)`, fmt.Sprintf(`{"n":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func published(t *testing.T, l *ledger.DB, above int64) int {
	t.Helper()
	var n int
	if err := l.SQL().QueryRow(`SELECT COUNT(*) FROM outbox WHERE published_at IS NOT NULL AND id > ?`, above).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWindowFailureResendsFromIt: event 5 of an aggregate fails once
// while 6 and later are in flight and acknowledged: none of them is
// marked published before 5 is, and the retry sends 5 again, then the
// rest after it; in the end every row is published.
func TestWindowFailureResendsFromIt(t *testing.T) {
	l := outbox(t, 40)
	w := newWindow(func(e *relay.Event, attempt int) error {
		if e.Row.ID == 5 && attempt == 1 {
			return errors.New("stream unavailable")
		}
		return nil
	})
	retried := false
	w.check = func(e *relay.Event) {
		if e.Row.ID == 5 && w.tries[5] == 1 {
			retried = true
			if n := published(t, l, 4); n != 0 {
				t.Errorf("%d rows after the failed one marked published before its retry", n)
			}
		}
	}
	r, err := relay.New(l, "q", w, relay.Options{Target: "test", Retry: spool.Retry{Base: time.Millisecond}, Poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Run(t.Context())
	if err != nil || st.Failed != 1 || st.Parked != 0 {
		t.Fatalf("run: %+v, %v", st, err)
	}
	if !retried {
		t.Fatal("row 5 was not sent again")
	}
	if n := published(t, l, 0); n != 40 {
		t.Fatalf("%d rows published, want 40", n)
	}
	// Sent in order up to 5's failure and past it (the window), then from
	// 5 on again.
	w.mu.Lock()
	defer w.mu.Unlock()
	again := -1
	for i, id := range w.sent {
		if id == 5 && i > 4 {
			again = i
		}
	}
	if again < 0 || w.sent[again-1] <= 5 {
		t.Fatalf("sent %v: want 5's window past it, then 5 again", w.sent)
	}
	for i := again; i < len(w.sent); i++ {
		if w.sent[i] != int64(5+i-again) {
			t.Fatalf("sent %v: after the retry of 5, want 6, 7... in order", w.sent)
		}
	}
}

// TestWindowParkedBlocks: event 5 is refused for good while 6 and later
// were acknowledged in its window: under --on-park block none of them is
// marked; under skip they are, and the aggregate goes on.
func TestWindowParkedBlocks(t *testing.T) {
	for _, policy := range []relay.Policy{relay.PolicyBlock, relay.PolicySkip} {
		l := outbox(t, 40)
		w := newWindow(func(e *relay.Event, _ int) error {
			if e.Row.ID == 5 {
				return spool.Permanent(errors.New("too large"))
			}
			return nil
		})
		r, err := relay.New(l, "q", w, relay.Options{Target: "test", Policy: policy, Poll: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		st, err := r.Run(t.Context())
		if err != nil || st.Parked != 1 {
			t.Fatalf("policy %d: %+v, %v", policy, st, err)
		}
		want := 0
		if policy == relay.PolicySkip {
			want = 35
		}
		if n := published(t, l, 5); n != want {
			t.Errorf("policy %d: %d rows after the parked one published, want %d", policy, n, want)
		}
		if n := published(t, l, 0); n != 4+want {
			t.Errorf("policy %d: %d rows published, want %d", policy, n, 4+want)
		}
	}
}

// TestWindowInterleavedAggregates: many aggregates whose rows interleave,
// read a few rows at a time (reads of several aggregates, each at its own
// row, answered by one query): each aggregate's events are sent in its
// order, each once, all are published, and one aggregate's failure is
// sent again before any later event of it.
func TestWindowInterleavedAggregates(t *testing.T) {
	const aggs, n = 8, 400
	l, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for i := range n {
		if _, err := l.SQL().Exec(`INSERT INTO outbox (aggregate, type, payload) VALUES (?, 't', '{}')`, fmt.Sprintf("g%d", i%aggs)); err != nil {
			t.Fatal(err)
		}
	}
	const failing = 37 // of aggregate g4 (ids count from 1)
	w := newWindow(func(e *relay.Event, attempt int) error {
		if e.Row.ID == failing && attempt == 1 {
			return errors.New("stream unavailable")
		}
		return nil
	})
	r, err := relay.New(l, "q", w, relay.Options{Target: "test", Batch: 3, Retry: spool.Retry{Base: time.Millisecond}, Poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Run(t.Context())
	if err != nil || st.Failed != 1 || st.Published < n { // the window past the failure is acknowledged twice
		t.Fatalf("run: %+v, %v", st, err)
	}
	if got := published(t, l, 0); got != n {
		t.Fatalf("%d rows published, want %d", got, n)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	byAgg := map[int64][]int64{}
	for _, id := range w.sent {
		a := (id - 1) % aggs
		byAgg[a] = append(byAgg[a], id)
	}
	for a := range int64(aggs) {
		sent := byAgg[a]
		if a != (failing-1)%aggs {
			for i, id := range sent {
				if want := a + 1 + int64(i)*aggs; id != want {
					t.Fatalf("aggregate g%d sent %v: want its rows once each, in order", a, sent)
				}
			}
			continue
		}
		// From the second send of the failing row on, the rest in order.
		again := -1
		for i, id := range sent {
			if id == failing && i > 0 && slices.Contains(sent[:i], failing) {
				again = i
			}
		}
		if again < 0 {
			t.Fatalf("aggregate g%d sent %v: the failed row was not sent again", a, sent)
		}
		for i, id := range sent[again:] {
			if want := failing + int64(i)*aggs; id != want {
				t.Fatalf("aggregate g%d sent %v: after the retry, want its rows from %d on in order", a, sent, failing)
			}
		}
	}
}
