package ledgertest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testConcurrent: 8 goroutines record the same msg_ids, each in its own
// order and batching; the PRIMARY KEY alone must leave exactly one processed
// row per msg_id and make every other delivery a duplicate (I2, I6). The
// orders differ on purpose: on PostgreSQL, batches that locked shared keys
// in different orders could deadlock.
func testConcurrent(t *testing.T, db *ledger.DB) {
	const (
		workers = 8
		msgs    = 40
		batch   = 7
	)
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won = map[string][]string{} // msg_id -> claims recorded as processed
		dup = 0
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ds []*spool.Delivery
			for i := range msgs {
				// A different permutation per worker: the multipliers are
				// coprime to msgs.
				k := (i*[workers]int{1, 3, 7, 9, 11, 13, 17, 19}[w] + 5*w) % msgs
				if w%2 == 1 {
					k = msgs - 1 - k
				}
				ds = append(ds, valid(fmt.Sprintf("w%d-%d", w, k), msg{ID: fmt.Sprintf("m%02d", k), OrderNo: "A", Seq: int64(k + 1), Amount: "1"}))
			}
			for len(ds) > 0 {
				n := min(batch, len(ds))
				res, err := db.Consumer().Record(t.Context(), ds[:n], spool.Work{})
				if err != nil {
					t.Errorf("worker %d: Record: %v", w, err)
					return
				}
				mu.Lock()
				for i, d := range ds[:n] {
					switch res[i].Outcome {
					case spool.OutcomeProcessed:
						won[d.Message.MsgID] = append(won[d.Message.MsgID], d.Claim)
					case spool.OutcomeDuplicate:
						dup++
					default:
						t.Errorf("worker %d: outcome of %s = %q", w, d.Claim, res[i].Outcome)
					}
				}
				mu.Unlock()
				ds = ds[n:]
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for k := range msgs {
		id := fmt.Sprintf("m%02d", k)
		claims := won[id]
		if len(claims) != 1 {
			t.Errorf("%s processed by %d claims %q, want exactly 1", id, len(claims), claims)
			continue
		}
		r, ok := processedRow(t, db, id)
		if !ok || r.Claim != claims[0] {
			t.Errorf("Processed(%s) = %+v, %v, want the row of claim %s", id, r, ok, claims[0])
		}
	}
	if want := workers*msgs - msgs; dup != want {
		t.Errorf("duplicates = %d, want %d", dup, want)
	}
	want := ledger.Stats{Processed: msgs, Duplicates: workers*msgs - msgs, DeadLettersByReason: map[spool.Reason]int64{}}
	if st := stats(t, db); st.Processed != want.Processed || st.Duplicates != want.Duplicates || st.DeadLetters != 0 {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}
	if ps, err := db.Messages().OrderCheck(t.Context()); err != nil || len(ps) != 0 {
		t.Errorf("Messages().OrderCheck = %+v, %v, want no problems", ps, err)
	}
}
