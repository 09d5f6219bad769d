package spool_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// parallelLedger is the SQLite ledger saying it runs two write
// transactions at once, as the PostgreSQL one does: the consumer then
// reserves ahead and settles from two goroutines (SQLite takes them in
// turns), the paths a PostgreSQL ledger takes, here under the race
// detector.
type parallelLedger struct{ ledger.Consumer }

func (parallelLedger) ConcurrentWrites() int { return 2 }

// TestCallerParallelWrites: with parallel reserves and settles, every
// msg_id is called once, in seq order per key with Ordered, and the
// outcomes add up.
func TestCallerParallelWrites(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprint("ordered=", ordered), func(t *testing.T) {
			const n, keys = 600, 7
			msgs := map[string]string{}
			for i := range n {
				body := fmt.Sprintf(`{"msg_id":"m%04d","order_no":"K%d","seq":%d,"amount":"1.00"}`, i, i%keys, i+1)
				msgs[fmt.Sprintf("m%04d.json", i)] = body
				if i%10 == 0 {
					msgs[fmt.Sprintf("m%04d-again.json", i)] = body
				}
			}
			f := newFixture(t, msgs)
			var mu sync.Mutex
			calls := map[string]int{}
			last := map[string]int64{}
			var outOfOrder []string
			caller := spool.CallerFunc(func(_ context.Context, d *spool.Delivery) error {
				mu.Lock()
				defer mu.Unlock()
				calls[d.Message.MsgID]++
				if d.Message.Seq < last[d.Message.OrderNo] {
					outOfOrder = append(outOfOrder, d.Message.MsgID)
				}
				last[d.Message.OrderNo] = d.Message.Seq
				return nil
			})
			c, err := spool.NewConsumer(f.dir, parallelLedger{f.ledger.Consumer()}, spool.Config{
				Caller: caller, Concurrency: 16, BatchSize: 32, Ordered: ordered,
			})
			if err != nil {
				t.Fatal(err)
			}
			st, err := c.Drain(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.Processed != n || st.Duplicates != n/10 {
				t.Errorf("processed %d, duplicates %d; want %d and %d", st.Processed, st.Duplicates, n, n/10)
			}
			if len(calls) != n {
				t.Errorf("%d msg_ids called, want %d", len(calls), n)
			}
			for id, k := range calls {
				if k != 1 {
					t.Errorf("msg_id %s called %d times, want once", id, k)
				}
			}
			if ordered && len(outOfOrder) > 0 {
				t.Errorf("called out of seq order within their key: %v", outOfOrder)
			}
		})
	}
}
