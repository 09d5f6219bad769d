package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/ledgertest"
)

func openTemp(t testing.TB) (*ledger.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.db")
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return db, path
}

func TestConformance(t *testing.T) {
	ledgertest.Run(t, ledgertest.Backend{
		Fresh: func(t *testing.T) string { return filepath.Join(t.TempDir(), "ledger.db") },
		// SQLite compares TEXT with the BINARY collation.
		ByteOrder: func(*testing.T, *ledger.DB) bool { return true },
	})
}

func delivery(claim, msgID string) *spool.Delivery {
	raw := `{"msg_id":` + strconv.Quote(msgID) + `,"order_no":"A","seq":1,"amount":"1.00"}`
	return &spool.Delivery{
		Claim: claim, File: msgID + ".json", Ino: 1, Consumer: "test", Size: int64(len(raw)),
		Message: &spool.Message{MsgID: msgID, OrderNo: "A", Seq: 1, Amount: "1.00", Raw: []byte(raw)},
		At:      time.Now(),
	}
}

// recordAll records msgs under claims prefix-<msg>, in batches, and returns
// how many were processed.
func recordAll(ctx context.Context, db *ledger.DB, prefix string, msgs []string, batch int) (int, error) {
	processed := 0
	for len(msgs) > 0 {
		n := min(batch, len(msgs))
		var ds []*spool.Delivery
		for _, m := range msgs[:n] {
			ds = append(ds, delivery(prefix+"-"+m, m))
		}
		res, err := db.Consumer().Record(ctx, ds, spool.Work{})
		if err != nil {
			return processed, err
		}
		for _, r := range res {
			if r.Outcome == spool.OutcomeProcessed {
				processed++
			}
		}
		msgs = msgs[n:]
	}
	return processed, nil
}

func msgIDs(n, rotate int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%03d", (i+rotate)%n)
	}
	return ids
}

func countRows(t *testing.T, db *ledger.DB, query string) int64 {
	t.Helper()
	var n int64
	if err := db.SQL().QueryRowContext(t.Context(), query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TestMultiProcess: consumer processes sharing the ledger file, for real.
// Each child is this test binary running TestHelperProcess.
func TestMultiProcess(t *testing.T) {
	_, path := openTemp(t) // create and migrate; the children migrate again
	const procs, msgs = 3, 50
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for i := range procs {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SPOOL_SQLITE_HELPER="+path, "SPOOL_SQLITE_HELPER_ID="+strconv.Itoa(i))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v\n%s", i, err, outs[i])
		}
	}
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := countRows(t, db, "SELECT COUNT(*) FROM processed"); n != msgs {
		t.Errorf("processed rows = %d, want %d", n, msgs)
	}
	if n := countRows(t, db, "SELECT COUNT(*) FROM claims"); n != procs*msgs {
		t.Errorf("recorded claims = %d, want %d", n, procs*msgs)
	}
}

// TestHelperProcess is a child of TestMultiProcess; on its own it does nothing.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv("SPOOL_SQLITE_HELPER")
	if path == "" {
		t.Skip("a child of TestMultiProcess")
	}
	id, _ := strconv.Atoi(os.Getenv("SPOOL_SQLITE_HELPER_ID"))
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := recordAll(t.Context(), db, fmt.Sprintf("p%d", id), msgIDs(50, id*13), 3); err != nil {
		t.Fatal(err)
	}
}

// TestPragmas: the settings hold on every connection of the pool, not only
// the first.
func TestPragmas(t *testing.T) {
	db, _ := openTemp(t)
	defer db.Close()
	var conns []*sql.Conn
	for range maxConns {
		c, err := db.SQL().Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	for i, c := range conns {
		for _, p := range []struct{ pragma, want string }{
			{"journal_mode", "wal"},
			{"synchronous", "2"}, // FULL
			{"busy_timeout", strconv.Itoa(busyTimeout)},
			{"foreign_keys", "1"},
		} {
			var got string
			if err := c.QueryRowContext(t.Context(), "PRAGMA "+p.pragma).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != p.want {
				t.Errorf("connection %d: PRAGMA %s = %q, want %q", i, p.pragma, got, p.want)
			}
		}
	}
	if got := db.SQL().Stats().MaxOpenConnections; got != maxConns {
		t.Errorf("max open connections = %d, want %d", got, maxConns)
	}
}

// TestImmediate: a write transaction holds the write lock from BEGIN, so a
// writer never has to upgrade a read lock (which fails at once with
// SQLITE_BUSY); a read-only one does not take it.
func TestImmediate(t *testing.T) {
	db, path := openTemp(t)
	defer db.Close()
	other, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetMaxOpenConns(1)
	tryWrite := func() error {
		c, err := other.Conn(t.Context())
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := c.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
			return err
		}
		_, err = c.ExecContext(t.Context(), "ROLLBACK")
		return err
	}

	ro, err := db.SQL().BeginTx(t.Context(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := tryWrite(); err != nil {
		t.Errorf("write beside a read-only transaction: %v, want success", err)
	}
	if err := ro.Rollback(); err != nil {
		t.Fatal(err)
	}

	tx, err := db.SQL().BeginTx(t.Context(), nil) // no statement yet
	if err != nil {
		t.Fatal(err)
	}
	if err := tryWrite(); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Errorf("write beside an open write transaction: %v, want database is locked", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := tryWrite(); err != nil {
		t.Errorf("write after rollback: %v, want success", err)
	}
}

// TestOddPath: '?', '#', '%' and spaces in the path name the file they say,
// not URI syntax.
func TestOddPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q?a#b%41 c")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "led ger%20.db")
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Consumer().Record(t.Context(), []*spool.Delivery{delivery("c1", "m1")}, spool.Work{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"led ger%20.db", "led ger%20.db-turn"}; !reflect.DeepEqual(names, want) {
		t.Errorf("files in %s = %q, want %q (WAL files removed on close, the turn file kept)", dir, names, want)
	}
}

func TestOpenMissingDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "ledger.db")
	if db, err := Open(t.Context(), path); err == nil {
		db.Close()
		t.Fatal("Open in a missing directory: nil error, want one")
	} else if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the path", err)
	}
}

// BenchmarkRecordBatch records batches mixed as spool bench's queue is: a
// tenth redeliveries of earlier messages and one in a hundred poison, so
// that a batch's statements have the odd row counts of a real drain.
func BenchmarkRecordBatch(b *testing.B) {
	const size = 256
	db, _ := openTemp(b)
	defer db.Close()
	ctx := context.Background()
	n := 0
	for b.Loop() {
		batch := make([]*spool.Delivery, size)
		for i := range batch {
			id := strconv.Itoa(n)
			switch {
			case n%100 == 42:
				batch[i] = &spool.Delivery{Claim: "c" + id, File: id + ".json", Consumer: "test", At: time.Now(),
					Reject: &spool.RejectError{Reason: spool.ReasonParse, Detail: "bench"}}
			case n%10 == 7:
				batch[i] = delivery("c"+id, "m"+strconv.Itoa(n-5)) // a redelivery
			default:
				batch[i] = delivery("c"+id, "m"+id)
			}
			n++
		}
		if _, err := db.Consumer().Record(ctx, batch, spool.Work{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkRecordKeyOrder records batches of 256 new msg_ids into a ledger
// that already holds 300k rows, the new msg_ids either following the
// existing ones (as a drop folder's sequence-numbered files arrive, taken
// in name order) or falling at random places among them (files taken in
// directory order, or random msg_ids such as UUIDv4). Random places touch
// a different leaf page of the msg_id index for nearly every row: each is
// read back in if the page cache lost it and written to the WAL again at
// every commit, so the cost per message grows with the ledger.
//
//	go test -run '^$' -bench RecordKeyOrder -count 6 ./ledger/sqlite
func BenchmarkRecordKeyOrder(b *testing.B) {
	const size, prefill = 256, 300_000
	for _, order := range []string{"sequential", "random"} {
		b.Run(order, func(b *testing.B) {
			db, _ := openTemp(b)
			defer db.Close()
			ctx := context.Background()
			// Existing ids are multiples of 1000, so that a random new id
			// lands between two of them.
			id := func(k int) string { return fmt.Sprintf("GEN-%012d", k) }
			record := func(ids []int) {
				batch := make([]*spool.Delivery, len(ids))
				for i, k := range ids {
					batch[i] = delivery("c"+id(k), id(k))
				}
				if _, err := db.Consumer().Record(ctx, batch, spool.Work{}); err != nil {
					b.Fatal(err)
				}
			}
			ids := make([]int, 0, size)
			for k := 0; k < prefill; k++ {
				ids = append(ids, k*1000)
				if len(ids) == size {
					record(ids)
					ids = ids[:0]
				}
			}
			next := prefill * 1000
			rng := rand.New(rand.NewPCG(1, 2))
			seen := map[int]bool{}
			n := 0
			for b.Loop() {
				ids = ids[:0]
				for len(ids) < size {
					k := next
					if order == "random" {
						k = rng.IntN(prefill)*1000 + 1 + rng.IntN(999)
					}
					next++
					if !seen[k] {
						seen[k] = true
						ids = append(ids, k)
					}
				}
				record(ids)
				n += size
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(n), "µs/msg")
		})
	}
}

// BenchmarkReserveSettle is the ledger's share of a consumer with a Caller:
// a batch of 256 new msg_ids reserved in one transaction, then settled in
// groups of settleGroup (the group commits of calls that finish together).
//
//	go test -run '^$' -bench ReserveSettle -benchtime 40x -count 3 ./ledger/sqlite
func BenchmarkReserveSettle(b *testing.B) {
	const size = 256
	for _, group := range []int{8, 32, 128} {
		b.Run("settle-"+strconv.Itoa(group), func(b *testing.B) {
			db, _ := openTemp(b)
			defer db.Close()
			ctx := context.Background()
			decide := spool.Retry{}.Decide
			n := 0
			var reserve, settle time.Duration
			for b.Loop() {
				batch := make([]*spool.Delivery, size)
				for i := range batch {
					id := strconv.Itoa(n)
					batch[i] = delivery("c"+id, "m"+id)
					n++
				}
				t0 := time.Now()
				if _, err := db.Consumer().Reserve(ctx, batch, spool.CallOwner{Session: "owner"}); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				for g := batch; len(g) > 0; g = g[min(group, len(g)):] {
					part := g[:min(group, len(g))]
					if _, err := db.Consumer().Settle(ctx, part, make([]error, len(part)), decide); err != nil {
						b.Fatal(err)
					}
				}
				reserve, settle = reserve+t1.Sub(t0), settle+time.Since(t1)
			}
			b.ReportMetric(float64(reserve.Microseconds())/float64(n), "µs-reserve/msg")
			b.ReportMetric(float64(settle.Microseconds())/float64(n), "µs-settle/msg")
		})
	}
}
