package spool_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
)

// orderedBatchQueue makes a queue of JSONL batch files with its ledger,
// opened as spool consume opens it, and returns it with the queue's
// BatchFiles.
func orderedBatchQueue(t *testing.T) (*queueopen.Queue, spool.BatchFiles) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "q")
	if err := queue.Init(root); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "spool.conf"), []byte(`{"format": "jsonl"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	q, err := queueopen.Open(context.Background(), root, queueopen.Options{Use: queueopen.Consume})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	conf, err := queueopen.ReadConfig(root)
	if err != nil {
		t.Fatal(err)
	}
	files, err := queueopen.Batch(q.Dir, conf, spool.DefaultContract())
	if err != nil || files == nil {
		t.Fatalf("batch files: %v", err)
	}
	return q, files
}

// keyOrder is a Caller that checks, per order key, that no two calls of
// a key overlap and that a key's seqs never go backwards (a retry calls
// the same seq again).
type keyOrder struct {
	mu        sync.Mutex
	busy      map[string]bool
	last      map[string]int64
	calls     map[string]int // per msg_id
	inFlight  int
	most      int
	errs      []string
	fail      func(d *spool.Delivery, nth int) error
	firstCall map[string]time.Time // per msg_id
}

func newKeyOrder() *keyOrder {
	return &keyOrder{busy: map[string]bool{}, last: map[string]int64{}, calls: map[string]int{},
		firstCall: map[string]time.Time{}}
}

func (k *keyOrder) Call(_ context.Context, d *spool.Delivery) error {
	m := d.Message
	k.mu.Lock()
	if k.busy[m.OrderNo] {
		k.errs = append(k.errs, fmt.Sprintf("%s called while another call of key %s runs", m.MsgID, m.OrderNo))
	}
	if m.Seq < k.last[m.OrderNo] {
		k.errs = append(k.errs, fmt.Sprintf("%s (seq %d) called after seq %d of key %s", m.MsgID, m.Seq, k.last[m.OrderNo], m.OrderNo))
	}
	k.busy[m.OrderNo], k.last[m.OrderNo] = true, m.Seq
	nth := k.calls[m.MsgID]
	k.calls[m.MsgID]++
	if nth == 0 {
		k.firstCall[m.MsgID] = time.Now()
	}
	k.inFlight++
	k.most = max(k.most, k.inFlight)
	fail := k.fail
	k.mu.Unlock()
	time.Sleep(time.Millisecond) // the downstream's latency, not a synchronisation
	var err error
	if fail != nil {
		err = fail(d, nth)
	}
	k.mu.Lock()
	k.busy[m.OrderNo] = false
	k.inFlight--
	k.mu.Unlock()
	return err
}

// putJSONL writes a JSONL batch file of records (msg_id, order_no, seq)
// into inbox/.
func putJSONL(t *testing.T, d *queue.Dir, name string, recs [][3]any) {
	t.Helper()
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, `{"msg_id":%q,"order_no":%q,"seq":%d,"amount":"1.00"}`+"\n", r[0], r[1], r[2])
	}
	if _, err := d.WriteFile(queue.Inbox, name, []byte(b.String())); err != nil {
		t.Fatal(err)
	}
}

// TestBatchRecordsOrdered: with Ordered, the records of one order key in
// two batch files are called one at a time, in file order and the first
// file's before the second's, while different keys are called at once; a
// record refused transiently holds its key's later records, in its file
// and in the next, until its retry succeeds, and not the other keys'; a
// dead letter lets its key go on.
func TestBatchRecordsOrdered(t *testing.T) {
	q, files := orderedBatchQueue(t)
	const keys, perFile = 4, 40
	for f, name := range []string{"a.jsonl", "b.jsonl"} {
		var recs [][3]any
		for i := 1; i <= perFile; i++ {
			for k := range keys {
				seq := f*perFile + i
				recs = append(recs, [3]any{fmt.Sprintf("K%d-%d", k, seq), fmt.Sprintf("K%d", k), seq})
			}
		}
		putJSONL(t, q.Dir, name, recs)
	}
	caller := newKeyOrder()
	caller.fail = func(d *spool.Delivery, nth int) error {
		switch d.Message.MsgID {
		case "K1-2":
			// Refused until K0's last record of the first file is
			// called: its retries hold K1 alone, the other keys go on
			// (were they held too, its attempts would run out).
			caller.mu.Lock()
			_, called := caller.firstCall["K0-40"]
			caller.mu.Unlock()
			if nth == 0 || !called {
				return errors.New("refused for now")
			}
		case "K2-5":
			return spool.Permanent(errors.New("refused for good"))
		}
		return nil
	}
	c, err := spool.NewConsumer(q.Dir, q.Ledger.Consumer(), spool.Config{
		Caller: caller, Concurrency: 8, BatchSize: 32, Ordered: true, Batch: files,
		Retry:     spool.Retry{Base: 20 * time.Millisecond, Cap: 100 * time.Millisecond, MaxAttempts: 200, NoJitter: true},
		RetryWait: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	total := 2 * perFile * keys
	if st.Processed != total-1 || st.DeadLetters != 1 {
		t.Fatalf("%+v, want %d processed and K2-5 dead-lettered", st, total-1)
	}
	caller.mu.Lock()
	defer caller.mu.Unlock()
	for _, e := range caller.errs {
		t.Error(e)
	}
	if n := caller.calls["K1-2"]; n < 2 {
		t.Errorf("K1-2 called %d times, want its refused calls and its retry", n)
	}
	if caller.calls["K2-6"] != 1 {
		t.Error("K2's records after its dead letter were not called")
	}
	if caller.most < 2 {
		t.Errorf("never more than %d call at once: different keys must be called concurrently", caller.most)
	}
}

// TestBatchDedupRefused: a dedup window on a batch queue is refused, not
// silently left unasked: a batch file's records are looked up in the
// ledger alone.
func TestBatchDedupRefused(t *testing.T) {
	q, files := orderedBatchQueue(t)
	_, err := spool.NewConsumer(q.Dir, q.Ledger.Consumer(), spool.Config{Batch: files, Window: nopWindow{}})
	if err == nil || !strings.Contains(err.Error(), "--dedup") {
		t.Fatalf("NewConsumer with a Window on a batch queue: %v, want a refusal naming --dedup", err)
	}
}

// nopWindow is a Window that knows nothing.
type nopWindow struct{}

func (nopWindow) Acquire(_ context.Context, ids []string, _ string) ([]spool.WindowEntry, error) {
	return make([]spool.WindowEntry, len(ids)), nil
}
func (nopWindow) Done(context.Context, []string, []string) error  { return nil }
func (nopWindow) Release(context.Context, []string, string) error { return nil }
