package ledgertest

import (
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// testTwoHandles: two ledgers on one database, as two consumer processes
// (or hosts) hold, record overlapping msg_ids at once, each in its own
// order and batching. The PRIMARY KEY admits one row per msg_id (I2), and
// no batch fails: on a single-writer engine none may fail with "database
// is locked", and elsewhere the ledger's msg_id-ordered inserts must not
// deadlock (or, where the engine may still give a transaction up, are run
// again: Dialect.Retry).
func testTwoHandles(t *testing.T, a, b *ledger.DB) {
	const msgs = 60
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		won   = map[string]int{}
		total int
	)
	for i, db := range []*ledger.DB{a, b, a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]string, msgs)
			for k := range ids {
				ids[k] = fmt.Sprintf("m%03d", (k*7+i*11)%msgs) // 7 is coprime to 60
			}
			if i%2 == 1 {
				slices.Reverse(ids)
			}
			size := 3 + i // batches of different sizes overlap differently
			for len(ids) > 0 {
				n := min(size, len(ids))
				var ds []*spool.Delivery
				for _, id := range ids[:n] {
					ds = append(ds, valid(fmt.Sprintf("h%d-%s", i, id), msg{ID: id}))
				}
				res, err := db.Consumer().Record(t.Context(), ds, spool.Work{})
				if err != nil {
					t.Errorf("handle %d: Record: %v", i, err)
					return
				}
				mu.Lock()
				for k, d := range ds {
					if res[k].Outcome == spool.OutcomeProcessed {
						won[d.Message.MsgID]++
						total++
					}
				}
				mu.Unlock()
				ids = ids[n:]
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if total != msgs || len(won) != msgs {
		t.Errorf("processed outcomes = %d over %d msg_ids, want %d over %d", total, len(won), msgs, msgs)
	}
	for id, n := range won {
		if n != 1 {
			t.Errorf("%s processed %d times, want 1", id, n)
		}
	}
	if n := count(t, a, "SELECT COUNT(*) FROM processed"); n != msgs {
		t.Errorf("processed rows = %d, want %d", n, msgs)
	}
	if n := count(t, b, "SELECT COUNT(*) FROM deliveries WHERE outcome = 'duplicate'"); n != 5*msgs {
		t.Errorf("duplicate deliveries = %d, want %d", n, 5*msgs)
	}
}

// testConcurrentOpen: processes starting at once on a new database all
// migrate it without error, and it is migrated once; processes starting
// at once on the migrated database find nothing to do (migrating is
// idempotent), and the schema still records.
func testConcurrentOpen(t *testing.T, dsn string) {
	var dbs []*ledger.DB
	for round := range 2 {
		opened := openAtOnce(t, dsn, 4)
		dbs = append(dbs, opened...)
		if t.Failed() {
			break
		}
		files, err := fs.Glob(opened[0].Dialect().Migrations(), "*.up.sql")
		if err != nil || len(files) == 0 {
			t.Fatalf("migrations: %q, %v", files, err)
		}
		if n := count(t, opened[0], "SELECT COUNT(*) FROM schema_migrations"); n != int64(len(files)) {
			t.Errorf("round %d: schema_migrations rows = %d, want one per migration, %d", round, n, len(files))
		}
	}
	for _, db := range dbs {
		if db != nil {
			defer db.Close()
		}
	}
	if !t.Failed() {
		record(t, dbs[len(dbs)-1], valid("c1", msg{ID: "m1"}))
	}
}

// openAtOnce opens n ledgers on dsn at once, as n processes starting
// together do; a failed open is a test error and a nil in its place.
func openAtOnce(t *testing.T, dsn string, n int) []*ledger.DB {
	var wg sync.WaitGroup
	dbs := make([]*ledger.DB, n)
	for i := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := ledger.Open(t.Context(), dsn, ledger.OpenOptions{})
			if err != nil {
				t.Errorf("Open %d: %v", i, err)
				return
			}
			dbs[i] = db
		}()
	}
	wg.Wait()
	return dbs
}

// testOrderCheckSQLOrder: OrderCheckSQL run as an operator would (sqlite3,
// psql) returns Messages.OrderCheck's rows; under a byte-order collation in
// Messages.OrderCheck's order, else in that order within each order_no.
func testOrderCheckSQLOrder(t *testing.T, db *ledger.DB, byteOrder func(*testing.T, *ledger.DB) bool) {
	var ds []*spool.Delivery
	for i, m := range []struct {
		order string
		seq   int64
	}{{"b", 1}, {"b", 3}, {"X", 1}, {"X", 3}, {"X", 12}, {"X", 12}, {"a", 2}, {"B", 2}, {"X", 9}, {"A", 1}, {"A", 2}} {
		ds = append(ds, valid(fmt.Sprintf("c%d", i), msg{ID: fmt.Sprintf("m%d", i), OrderNo: m.order, Seq: m.seq, Amount: "1.00"}))
	}
	// A redelivery is not a duplicate seq.
	ds = append(ds, valid("again", msg{ID: "m0", OrderNo: "b", Seq: 1, Amount: "1.00"}))
	record(t, db, ds...)
	want := []ledger.OrderProblem{
		{OrderNo: "B", Seq: "1", Problem: ledger.ProblemMissing},
		{OrderNo: "X", Seq: "2", Problem: ledger.ProblemMissing},
		{OrderNo: "X", Seq: "4-8", Problem: ledger.ProblemMissing},
		{OrderNo: "X", Seq: "10-11", Problem: ledger.ProblemMissing},
		{OrderNo: "X", Seq: "12", Problem: ledger.ProblemDuplicate},
		{OrderNo: "a", Seq: "1", Problem: ledger.ProblemMissing},
		{OrderNo: "b", Seq: "2", Problem: ledger.ProblemMissing},
	}
	check, err := db.Messages().OrderCheck(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(check, want) {
		t.Errorf("Messages().OrderCheck =\n%+v\nwant\n%+v", check, want)
	}
	got, err := RunOrderCheckSQL(t, db)
	if err != nil {
		t.Fatal(err)
	}
	if byteOrder != nil && byteOrder(t, db) {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("OrderCheckSQL under byte order =\n%+v\nwant\n%+v", got, want)
		}
		return
	}
	// order_no follows the collation; within an order_no the rows keep
	// the query's order.
	slices.SortStableFunc(got, func(a, b ledger.OrderProblem) int { return strings.Compare(a.OrderNo, b.OrderNo) })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("OrderCheckSQL, re-sorted by order_no =\n%+v\nwant\n%+v", got, want)
	}
}
