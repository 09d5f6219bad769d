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
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
)

// fixture is a queue with a ledger and a few messages in inbox/.
type fixture struct {
	dir    *queue.Dir
	ledger *ledger.DB
}

func newFixture(t *testing.T, msgs map[string]string) *fixture {
	t.Helper()
	root := filepath.Join(t.TempDir(), "q")
	if err := queue.Init(root); err != nil {
		t.Fatal(err)
	}
	d, err := queue.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	l, err := sqlite.Open(context.Background(), filepath.Join(root, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if _, err := l.SQL().Exec(`CREATE TABLE balances (order_no TEXT PRIMARY KEY, total INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for name, body := range msgs {
		if _, err := d.WriteFile(queue.Inbox, name, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{dir: d, ledger: l}
}

func (f *fixture) count(t *testing.T, s queue.Stage) int {
	t.Helper()
	n, err := f.dir.Count(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fixture) scalar(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := f.ledger.SQL().QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func msg(id, order string, seq int) string {
	return fmt.Sprintf(`{"msg_id":%q,"order_no":%q,"seq":%d,"amount":"10"}`, id, order, seq)
}

// addBalance is a business handler writing through the ledger's transaction.
func addBalance(ctx context.Context, tx *sql.Tx, m *spool.Message) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO balances (order_no, total) VALUES (?, 10)
ON CONFLICT (order_no) DO UPDATE SET total = total + 10`, m.OrderNo)
	return err
}

func TestHandlerTransientThenSuccess(t *testing.T) {
	f := newFixture(t, map[string]string{"a.json": msg("A", "O1", 1), "b.json": msg("B", "O1", 2)})
	var calls atomic.Int32
	h := spool.HandlerFunc(func(ctx context.Context, tx *sql.Tx, d *spool.Delivery) error {
		m := d.Message
		if err := addBalance(ctx, tx, m); err != nil {
			return err
		}
		if m.MsgID == "A" && calls.Add(1) < 3 {
			return errors.New("downstream timeout") // after its write: the rollback must undo it
		}
		return nil
	})
	c, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), spool.Config{Handler: h, RetryWait: time.Minute,
		Retry: spool.Retry{Base: 20 * time.Millisecond, Cap: time.Second, MaxAttempts: 5, NoJitter: true}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Processed != 2 || st.Retries != 2 || st.DeadLetters != 0 {
		t.Fatalf("stats = %+v, want 2 processed after 2 retries", st)
	}
	if got := f.scalar(t, `SELECT total FROM balances WHERE order_no = 'O1'`); got != 20 {
		t.Fatalf("balance = %d, want 20: each message's business write committed once", got)
	}
	if got := f.scalar(t, `SELECT COUNT(*) FROM attempts`); got != 0 {
		t.Fatalf("attempts rows = %d after success, want 0", got)
	}
	if f.count(t, queue.Done) != 2 || f.count(t, queue.Processing) != 0 {
		t.Fatalf("done=%d processing=%d", f.count(t, queue.Done), f.count(t, queue.Processing))
	}
}

func TestHandlerPermanentAndPanic(t *testing.T) {
	f := newFixture(t, map[string]string{"a.json": msg("A", "O1", 1), "b.json": msg("B", "O2", 1), "c.json": msg("C", "O3", 1)})
	h := spool.HandlerFunc(func(ctx context.Context, tx *sql.Tx, d *spool.Delivery) error {
		m := d.Message
		if err := addBalance(ctx, tx, m); err != nil {
			return err
		}
		switch m.MsgID {
		case "A":
			return spool.Permanent(errors.New("order O1 is closed"))
		case "B":
			panic("nil map")
		}
		return nil
	})
	c, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), spool.Config{Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Processed != 1 || st.DeadLetters != 2 || st.Retries != 0 {
		t.Fatalf("stats = %+v, want 1 processed, 2 dead letters at once", st)
	}
	if got := f.scalar(t, `SELECT COUNT(*) FROM processed`); got != 1 {
		t.Fatalf("processed rows = %d, want 1: a failed handler rolls back its row", got)
	}
	if got := f.scalar(t, `SELECT COUNT(*) FROM balances`); got != 1 {
		t.Fatalf("balances rows = %d, want 1: failed handlers' writes rolled back", got)
	}
	if got := f.scalar(t, `SELECT COUNT(*) FROM deliveries WHERE reason = 'handler' AND detail LIKE '%closed%'`); got != 1 {
		t.Fatalf("permanent failure's dead letter with detail: %d rows", got)
	}
	if got := f.scalar(t, `SELECT COUNT(*) FROM deliveries WHERE reason = 'handler' AND detail LIKE '%panicked%'`); got != 1 {
		t.Fatalf("panic's dead letter: %d rows", got)
	}
}

func TestHandlerRetriesExhausted(t *testing.T) {
	f := newFixture(t, map[string]string{"a.json": msg("A", "O1", 1)})
	h := spool.HandlerFunc(func(context.Context, *sql.Tx, *spool.Delivery) error { return errors.New("still locked") })
	c, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), spool.Config{Handler: h, RetryWait: time.Minute,
		Retry: spool.Retry{Base: time.Millisecond, Cap: 5 * time.Millisecond, MaxAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.DeadLetters != 1 || st.Retries != 2 {
		t.Fatalf("stats = %+v, want 2 retries then a dead letter", st)
	}
	var reason, detail string
	var attempts int
	if err := f.ledger.SQL().QueryRow(`SELECT reason, detail, attempts FROM deliveries`).Scan(&reason, &detail, &attempts); err != nil {
		t.Fatal(err)
	}
	if reason != "retries-exhausted" || detail != "still locked" || attempts != 3 {
		t.Fatalf("dead letter = %s %q attempts=%d", reason, detail, attempts)
	}
	if f.count(t, queue.Error) != 1 || f.count(t, queue.Processing) != 0 {
		t.Fatal("the message is not alone in error/")
	}
}

// TestBackoffDoesNotBlock: a message waiting for its retry never delays the
// hundred behind it, and an interrupted run keeps its attempt count.
func TestBackoffDoesNotBlock(t *testing.T) {
	msgs := map[string]string{"000-slow.json": msg("SLOW", "S", 1)}
	for i := range 100 {
		msgs[fmt.Sprintf("m%03d.json", i)] = msg(fmt.Sprintf("M%03d", i), "O", i+1)
	}
	f := newFixture(t, msgs)
	h := spool.HandlerFunc(func(_ context.Context, _ *sql.Tx, d *spool.Delivery) error {
		m := d.Message
		if m.MsgID == "SLOW" {
			return errors.New("busy")
		}
		return nil
	})
	// The timeout is a safety net; the test proceeds when the 100 are done.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var done atomic.Int32
	c, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), spool.Config{Handler: h, BatchSize: 10,
		Retry: spool.Retry{Base: time.Hour, Cap: time.Hour, MaxAttempts: 5},
		OnDelivery: func(*spool.Delivery, spool.Result, string) {
			if done.Add(1) == 100 {
				cancel() // all others are through while SLOW waits an hour
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Drain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Processed != 100 || st.Retries != 1 {
		t.Fatalf("stats = %+v, want the 100 processed while SLOW waits", st)
	}
	// Stopped: SLOW went back to inbox/, processing/ is empty, the attempt is kept.
	if f.count(t, queue.Inbox) != 1 || f.count(t, queue.Processing) != 0 {
		t.Fatalf("inbox=%d processing=%d", f.count(t, queue.Inbox), f.count(t, queue.Processing))
	}
	if got := f.scalar(t, `SELECT attempts FROM attempts WHERE msg_id = 'SLOW'`); got != 1 {
		t.Fatalf("attempts = %d, want 1", got)
	}
	// A new consumer claims it early and holds it rather than trying it.
	c2, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), spool.Config{Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	st2, err := c2.Watch(ctx2)
	if err != nil {
		t.Fatal(err)
	}
	if st2.Total() != 0 || st2.Retries != 0 {
		t.Fatalf("second run tried SLOW before it was due: %+v", st2)
	}
	if got := f.scalar(t, `SELECT attempts FROM attempts WHERE msg_id = 'SLOW'`); got != 1 {
		t.Fatalf("attempts after restart = %d, want 1", got)
	}
	if _, err := os.Stat(filepath.Join(f.dir.StagePath(queue.Inbox), "000-slow.json")); err != nil {
		t.Fatalf("SLOW is not back in inbox/: %v", err)
	}
}

// batchSizes is a ledger that remembers how many deliveries each Record
// call carried.
type batchSizes struct {
	spool.Ledger
	sizes []int
}

func (b *batchSizes) Record(ctx context.Context, batch []*spool.Delivery, w spool.Work) ([]spool.Result, error) {
	b.sizes = append(b.sizes, len(batch))
	return b.Ledger.Record(ctx, batch, w)
}

// TestBatchBytesBound: a batch closes once its claimed files reach
// BatchBytes, so large messages make small batches; every message is still
// consumed, a message larger than the bound still goes through (alone in
// its batch here), and the names not taken wait in inbox/ for the next one.
func TestBatchBytesBound(t *testing.T) {
	pad := func(n int) string { return fmt.Sprintf("%*s", n, "") }
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			msgs := map[string]string{}
			size := 0
			for i := range 21 {
				// All of one size: two-digit ids and seqs.
				m := fmt.Sprintf(`{"msg_id":"m%02d","order_no":"O","seq":%d,"amount":"1","pad":%q}`, i, i+10, pad(950))
				msgs[fmt.Sprintf("m%02d.json", i)] = m
				size = len(m)
			}
			msgs["m21-big.json"] = fmt.Sprintf(`{"msg_id":"big","order_no":"O","seq":30,"amount":"1","pad":%q}`, pad(5000))
			f := newFixture(t, msgs)
			l := &batchSizes{Ledger: f.ledger.Consumer()}
			// Two messages stay under the bound, the third crosses it: a
			// message weighs its bytes and its five Fields
			// (TestBatchBytesParsed).
			weight := size + 5*int(unsafe.Sizeof(spool.Field{}))
			c, err := spool.NewConsumer(f.dir, l, spool.Config{Workers: workers, BatchBytes: int64(2*weight + 1)})
			if err != nil {
				t.Fatal(err)
			}
			st, err := c.Drain(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.Processed != 22 || f.count(t, queue.Done) != 22 || f.count(t, queue.Inbox) != 0 {
				t.Fatalf("stats %+v, done %d, inbox %d; want all 22 processed", st, f.count(t, queue.Done), f.count(t, queue.Inbox))
			}
			// The bound is checked after each claim, and the claims are made
			// one after another whatever the pool: a batch holds exactly the
			// files up to the one that crosses it, so seven batches of three,
			// then the 5000-byte message alone.
			if want := []int{3, 3, 3, 3, 3, 3, 3, 1}; !slices.Equal(l.sizes, want) {
				t.Errorf("batch sizes %v, want %v", l.sizes, want)
			}
		})
	}
}

// TestBatchBytesParsed: what a message's fields hold parsed counts
// against BatchBytes, since a message of many short fields holds several
// times its bytes in Fields (56 bytes each): 200 files of 1 MiB and
// 130 000 fields took 668 MB when batches were bounded by the files'
// bytes alone. The claims run ahead of the parsing, so the first batch
// may hold as many as its bytes allow; the later ones are bounded by
// what the batch before held a byte.
func TestBatchBytesParsed(t *testing.T) {
	msgs := map[string]string{}
	size := 0
	for i := range 12 {
		var b strings.Builder
		fmt.Fprintf(&b, `{"msg_id":"m%02d","order_no":"O","seq":%d,"amount":"1"`, i, i+10)
		for f := range 100 {
			fmt.Fprintf(&b, `,"f%02d":0`, f)
		}
		b.WriteString("}")
		msgs[fmt.Sprintf("m%02d.json", i)] = b.String()
		size = b.Len() // all of one size: two-digit ids and seqs
	}
	f := newFixture(t, msgs)
	l := &batchSizes{Ledger: f.ledger.Consumer()}
	// By their bytes, three files stay under the bound and a fourth
	// crosses it; with their 104 Fields (5 824 bytes, near seven times
	// their 853), one crosses it.
	c, err := spool.NewConsumer(f.dir, l, spool.Config{Workers: 1, BatchBytes: int64(3*size + 1)})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Processed != 12 || f.count(t, queue.Done) != 12 {
		t.Fatalf("stats %+v, done %d; want all 12 processed", st, f.count(t, queue.Done))
	}
	if len(l.sizes) < 2 || l.sizes[0] > 4 || slices.ContainsFunc(l.sizes[1:], func(n int) bool { return n != 1 }) {
		t.Errorf("batch sizes %v, want at most 4 then 1 each", l.sizes)
	}
}

// TestWaitingClaimDoesNotSpin: a message waits in processing/ for its
// retry while a redelivery of the same name arrives in inbox/. The newer
// file cannot be claimed until the older goes back, so the watching
// consumer must wait, not scan inbox/ again and again until the retry is
// due (it did, at 80% of a core). Once the retry is due, both are done.
func TestWaitingClaimDoesNotSpin(t *testing.T) {
	f := newFixture(t, map[string]string{"a.json": msg("A1", "O", 1)})
	var fail atomic.Bool
	fail.Store(true)
	h := spool.HandlerFunc(func(_ context.Context, _ *sql.Tx, d *spool.Delivery) error {
		if d.Message.MsgID == "A1" && fail.Load() {
			return errors.New("busy")
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const poll = 50 * time.Millisecond
	c, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), spool.Config{Handler: h, PollInterval: poll,
		Retry: spool.Retry{Base: time.Hour, Cap: time.Hour, MaxAttempts: 5, NoJitter: true}})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		st  spool.Stats
		err error
	}
	out := make(chan result, 1)
	go func() { st, err := c.Watch(ctx); out <- result{st, err} }()
	deadline := time.Now().Add(20 * time.Second)
	for f.scalar(t, `SELECT COUNT(*) FROM attempts WHERE msg_id = 'A1'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("A1 never failed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := f.dir.WriteFile(queue.Inbox, "a.json", []byte(msg("A2", "O", 2))); err != nil {
		t.Fatal(err)
	}
	// Half a second with A1 waiting an hour and A2 in the way of nothing
	// but A1: about ten polls. The spinning consumer made thousands of passes.
	window, stop := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer stop()
	<-window.Done()
	cancel()
	r := <-out
	if r.err != nil {
		t.Fatal(r.err)
	}
	if limit := int(10 * time.Second / poll); r.st.Passes > limit {
		t.Fatalf("%d passes in about half a second of waiting (%d polls would be 10 s of them): the consumer spins", r.st.Passes, limit)
	}
	// Due now: a new consumer with A1's retry due at once gets both through.
	fail.Store(false)
	if _, err := f.ledger.SQL().Exec(`UPDATE attempts SET next_at = '2000-01-01T00:00:00.000000Z'`); err != nil {
		t.Fatal(err)
	}
	c2, err := spool.NewConsumer(f.dir, f.ledger.Consumer(), spool.Config{Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c2.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Processed != 2 || f.count(t, queue.Done) != 2 {
		t.Fatalf("after the retry fell due: %+v, done/ %d; want A1 and A2 processed", st, f.count(t, queue.Done))
	}
}
