package ledger_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/internal/testenv"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/postgres"
	"github.com/spoolq/spool/ledger/sqlite"
)

// The history queries run on both engines: SQLite always, PostgreSQL when
// SPOOL_TEST_POSTGRES names a server (required on CI), each case on a
// fresh ledger (a schema of its own on PostgreSQL).

// historyCases are the cases every engine runs.
var historyCases = []struct {
	name string
	run  func(t *testing.T, db *ledger.DB)
}{
	{"DeadLetterHistory", testDeadLetterHistory},
	{"DeadLetterHistoryHighInode", testDeadLetterHistoryHighInode},
	{"Replays", testReplays},
	{"Conflicts", testConflicts},
	{"ProcessedIDs", testProcessedIDs},
	{"Prune", testPrune},
	{"PruneWithoutKeep", testPruneWithoutKeep},
	{"PruneRefuses", testPruneRefuses},
	{"AfterClose", testHistoryAfterClose},
}

func TestHistorySQLite(t *testing.T) {
	for _, c := range historyCases {
		t.Run(c.name, func(t *testing.T) {
			db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			c.run(t, db)
		})
	}
}

func TestHistoryPostgreSQL(t *testing.T) {
	dsn := testenv.Postgres(t)
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	for _, c := range historyCases {
		t.Run(c.name, func(t *testing.T) {
			var rnd [8]byte
			_, _ = rand.Read(rnd[:])
			schema := "spool_history_" + hex.EncodeToString(rnd[:])
			if _, err := admin.ExecContext(t.Context(), "CREATE SCHEMA "+schema); err != nil {
				t.Fatal(err)
			}
			// Cleanups run last-in first-out: the ledger closes first.
			t.Cleanup(func() {
				if _, err := admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
					t.Errorf("drop schema %s: %v", schema, err)
				}
			})
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			if !strings.Contains(dsn, "://") {
				sep = " "
			}
			param := "search_path=" + schema
			db, err := postgres.Open(t.Context(), dsn+sep+param)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			c.run(t, db)
		})
	}
}

func hashOf(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

// message returns the delivery of a valid message with the given body.
func message(claim, file string, ino uint64, id, body string) *spool.Delivery {
	return &spool.Delivery{
		Claim: claim, File: file, Ino: ino, Consumer: "a1b2c3-42@host1",
		Hash: hashOf(body), Size: int64(len(body)),
		Message: &spool.Message{MsgID: id, OrderNo: "O", Seq: 1, Amount: "1", Raw: []byte(body)},
		At:      time.Now(),
	}
}

// poison returns the delivery of a message rejected with reason.
func poison(claim, file string, ino uint64, reason spool.Reason, field, detail string) *spool.Delivery {
	return &spool.Delivery{
		Claim: claim, File: file, Ino: ino, Consumer: "a1b2c3-42@host1", Size: 2,
		Reject: &spool.RejectError{Reason: reason, Field: field, Detail: detail},
		At:     time.Now(),
	}
}

func mustRecord(t *testing.T, db *ledger.DB, batch ...*spool.Delivery) []spool.Result {
	t.Helper()
	res, err := db.Consumer().Record(t.Context(), batch, spool.Work{})
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	return res
}

// failWork records d with a handler that fails permanently: a dead letter
// with reason handler and one attempt.
func failWork(t *testing.T, db *ledger.DB, d *spool.Delivery, msg string) {
	t.Helper()
	h := spool.HandlerFunc(func(context.Context, *sql.Tx, *spool.Delivery) error {
		return spool.Permanent(errors.New(msg))
	})
	res, err := db.Consumer().Record(t.Context(), []*spool.Delivery{d}, spool.Work{Handler: h, Decide: spool.Retry{MaxAttempts: 1}.Decide})
	if err != nil {
		t.Fatalf("RecordWork: %v", err)
	}
	if res[0].Outcome != spool.OutcomeDeadLetter {
		t.Fatalf("outcome %s, want a dead letter", res[0].Outcome)
	}
}

func exec(t *testing.T, db *ledger.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.SQL().ExecContext(t.Context(), db.Dialect().Rebind(query), args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func testDeadLetterHistory(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	// Inode 7: a poison message, then (replayed and fixed, but failing in
	// the handler) a handler dead letter of msg_id m7. Inode 8 and a valid
	// delivery of inode 7 must not show.
	mustRecord(t, db, poison("c1", "a.json", 7, spool.ReasonMissingField, "amount", "required field is missing"))
	mustRecord(t, db, poison("c2", "b.json", 8, spool.ReasonParse, "", "not JSON"))
	failWork(t, db, message("c3", "a.json", 7, "m7", `{"msg_id":"m7"}`), "order closed")
	mustRecord(t, db, message("c4", "z.json", 7, "m9", `{"msg_id":"m9"}`))

	got, err := db.DeadLetters().History(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("history of inode 7 has %d records, want 2: %+v", len(got), got)
	}
	first, second := got[0], got[1]
	if first.Claim != "c1" || first.Reason != spool.ReasonMissingField || first.Field != "amount" ||
		first.Detail != "required field is missing" || first.MsgID != "" || first.Attempts != 0 ||
		!first.FirstFailure.IsZero() || !first.LastFailure.IsZero() || first.Ino != 7 || first.File != "a.json" ||
		first.Consumer != "a1b2c3-42@host1" || first.At.IsZero() {
		t.Errorf("poison record = %+v", first)
	}
	if second.Claim != "c3" || second.Reason != spool.ReasonHandler || second.Detail != "order closed" ||
		second.MsgID != "m7" || second.Attempts != 1 || second.FirstFailure.IsZero() ||
		second.LastFailure.Before(second.FirstFailure) || second.ContentHash != hashOf(`{"msg_id":"m7"}`) ||
		second.Size != int64(len(`{"msg_id":"m7"}`)) {
		t.Errorf("handler record = %+v", second)
	}
	if !(first.ID < second.ID) {
		t.Errorf("ids %d, %d: want commit order, oldest first", first.ID, second.ID)
	}
	if got, err := db.DeadLetters().History(ctx, 0); err != nil || got != nil {
		t.Errorf("history of inode 0 = %v, %v; want nil (unknown)", got, err)
	}
	if got, err := db.DeadLetters().History(ctx, 99); err != nil || len(got) != 0 {
		t.Errorf("history of inode 99 = %v, %v; want none", got, err)
	}
}

func testDeadLetterHistoryHighInode(t *testing.T, db *ledger.DB) {
	// An inode above 2^63-1 is stored with the same bits and read back.
	const ino = uint64(1<<63 + 5)
	mustRecord(t, db, poison("c1", "a.json", ino, spool.ReasonParse, "", "x"))
	got, err := db.DeadLetters().History(t.Context(), ino)
	if err != nil || len(got) != 1 || got[0].Ino != ino {
		t.Fatalf("history = %+v, %v; want one record of inode %d", got, err, ino)
	}
}

func testReplays(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	if got, err := db.Replays().List(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Replays of a new ledger = %v, %v", got, err)
	}
	t1 := time.Date(2025, 3, 1, 12, 0, 0, 123456000, time.UTC)
	for _, r := range []ledger.Replay{
		{File: "a.json", NewName: "a~2.json", Ino: 9, By: "alice", Note: "fixed upstream", At: t1},
		{File: "b.json", NewName: "b.json", By: "bob", At: t1.Add(time.Hour)},
	} {
		if err := db.Replays().Record(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.Replays().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []ledger.Replay{
		{File: "a.json", NewName: "a~2.json", Ino: 9, By: "alice", Note: "fixed upstream", At: t1},
		{File: "b.json", NewName: "b.json", By: "bob", At: t1.Add(time.Hour)},
	}
	var plain []ledger.Replay
	for i, r := range got {
		if i > 0 && r.ID <= got[i-1].ID {
			t.Errorf("ids not ascending: %d after %d", r.ID, got[i-1].ID)
		}
		plain = append(plain, r.Replay)
	}
	if !reflect.DeepEqual(plain, want) {
		t.Errorf("Replays =\n%+v\nwant\n%+v", plain, want)
	}
}

func testConflicts(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	a1, a2 := `{"msg_id":"b","v":1}`, `{"msg_id":"b","v":2}`
	z1, z2, z3 := `{"msg_id":"a","v":1}`, `{"msg_id":"a","v":2}`, `{"msg_id":"a","v":3}`
	mustRecord(t, db, message("c1", "b1.json", 1, "b", a1), message("c2", "a1.json", 2, "a", z1))
	// A plain duplicate (same body) is no conflict.
	mustRecord(t, db, message("c3", "b1-again.json", 3, "b", a1))
	// Conflicts, recorded out of msg_id order; a's two arrive later and
	// their times say which came first.
	later := message("c5", "a3.json", 5, "a", z3)
	earlier := message("c6", "a2.json", 6, "a", z2)
	earlier.At = later.At.Add(-time.Minute)
	mustRecord(t, db, message("c4", "b2.json", 4, "b", a2))
	mustRecord(t, db, later)
	mustRecord(t, db, earlier)

	got, err := db.Messages().Conflicts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ id, pFile, pHash, dFile, dHash string }
	var rows []row
	for _, c := range got {
		rows = append(rows, row{c.MsgID, c.ProcessedFile, c.ProcessedHash, c.DuplicateFile, c.DuplicateHash})
		if c.At.IsZero() || c.Consumer != "a1b2c3-42@host1" {
			t.Errorf("conflict %+v: want its time and consumer", c)
		}
	}
	want := []row{
		{"a", "a1.json", hashOf(z1), "a2.json", hashOf(z2)},
		{"a", "a1.json", hashOf(z1), "a3.json", hashOf(z3)},
		{"b", "b1.json", hashOf(a1), "b2.json", hashOf(a2)},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("Conflicts =\n%v\nwant\n%v", rows, want)
	}

	// A conflict outlives its processed row (pruned): that side is empty.
	exec(t, db, `DELETE FROM processed WHERE msg_id = 'b'`)
	got, err = db.Messages().Conflicts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2].ProcessedFile != "" || got[2].ProcessedHash != "" || got[2].DuplicateFile != "b2.json" {
		t.Errorf("after the processed row went: %+v", got)
	}
}

func testProcessedIDs(t *testing.T, db *ledger.DB) {
	var batch []*spool.Delivery
	var ids []string
	for i := range 300 { // more than one chunk of the IN list
		id := fmt.Sprintf("m%03d", i)
		if i%2 == 0 {
			batch = append(batch, message("c"+id, id+".json", uint64(i+1), id, `{"msg_id":"`+id+`"}`))
		}
		ids = append(ids, id)
	}
	mustRecord(t, db, batch...)
	ids = append(ids, "", "m000", "nope")
	got, err := db.Messages().ProcessedIDs(t.Context(), ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 150 {
		t.Errorf("%d processed, want 150", len(got))
	}
	for _, id := range []string{"m000", "m298", "m150"} {
		if !got[id] {
			t.Errorf("%s not reported processed", id)
		}
	}
	for _, id := range []string{"m001", "m299", "nope", ""} {
		if got[id] {
			t.Errorf("%q reported processed", id)
		}
	}
	if got, err := db.Messages().ProcessedIDs(t.Context(), nil); err != nil || len(got) != 0 {
		t.Errorf("Messages().ProcessedIDs(nil) = %v, %v", got, err)
	}
}

// pruneFixture records, all "old" (40 days ago) unless noted:
// m1 processed + a duplicate (c5) + a conflict (c6), m2 processed, m3
// processed recently, an old dead letter, and a processed delivery row (c0)
// as ledgers before migration 003 wrote them; it returns the window edge,
// 30 days ago.
func pruneFixture(t *testing.T, db *ledger.DB) time.Time {
	t.Helper()
	mustRecord(t, db,
		message("c1", "m1.json", 10, "m1", `{"msg_id":"m1"}`),
		message("c2", "m2.json", 20, "m2", `{"msg_id":"m2"}`),
		message("c3", "m3.json", 30, "m3", `{"msg_id":"m3"}`),
		poison("c4", "bad.json", 40, spool.ReasonParse, "", "not JSON"))
	mustRecord(t, db, message("c5", "m1-again.json", 11, "m1", `{"msg_id":"m1"}`),
		message("c6", "m1-other.json", 12, "m1", `{"msg_id":"m1","x":1}`))
	old := time.Now().Add(-40 * 24 * time.Hour).UTC().Format(ledger.TimeLayout)
	exec(t, db, `UPDATE processed SET processed_at = ? WHERE msg_id IN ('m1', 'm2')`, old)
	exec(t, db, `INSERT INTO deliveries (claim, file, ino, consumer, msg_id, outcome, at)
VALUES ('c0', 'm0.json', 5, 'old', 'm0', 'processed', ?)`, old)
	exec(t, db, `UPDATE deliveries SET at = ? WHERE claim <> 'c3'`, old)
	return time.Now().Add(-30 * 24 * time.Hour)
}

func ledgerState(t *testing.T, db *ledger.DB) []string {
	t.Helper()
	rows, err := db.SQL().QueryContext(t.Context(), `SELECT 'p:' || msg_id FROM processed
UNION ALL SELECT 'd:' || claim || ':' || outcome FROM deliveries
UNION ALL SELECT 'r:' || file FROM replays`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func testPrune(t *testing.T, db *ledger.DB) {
	ctx := t.Context()
	before := pruneFixture(t, db)
	start := ledgerState(t, db)

	// A dry run counts exactly what the real run removes, and removes
	// nothing.
	// c2 (m2's processed delivery) and c5 (a duplicate) are still claimed
	// in processing/.
	keep := []string{"c2", "c5"}
	dry, err := db.Fsck().Prune(ctx, ledger.Prune{Before: before, KeepClaims: keep, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := (ledger.Pruned{Processed: 1, Deliveries: 2}); dry != want {
		t.Errorf("dry run = %+v, want %+v", dry, want)
	}
	if got := ledgerState(t, db); !slices.Equal(got, start) {
		t.Fatalf("a dry run changed the ledger:\n%v\nwant\n%v", got, start)
	}

	got, err := db.Fsck().Prune(ctx, ledger.Prune{Before: before, KeepClaims: keep})
	if err != nil {
		t.Fatal(err)
	}
	if got != dry {
		t.Errorf("prune = %+v, the dry run said %+v", got, dry)
	}
	// Left: m2 and the duplicate c5, whose claims are still in
	// processing/, m3, too recent, and the dead letter, never pruned.
	want := []string{"d:c4:dead-letter", "d:c5:duplicate", "p:m2", "p:m3"}
	if state := ledgerState(t, db); !slices.Equal(state, want) {
		t.Errorf("after prune: %v, want %v", state, want)
	}
	// I7: recovery still finds the in-flight claim's outcome.
	if o, ok, err := db.Consumer().ClaimOutcome(ctx, "c2", "m2"); err != nil || !ok || o != spool.OutcomeProcessed {
		t.Errorf("ClaimOutcome(c2) = %s, %v, %v", o, ok, err)
	}
	if o, ok, err := db.Consumer().ClaimOutcome(ctx, "c5", "m1"); err != nil || !ok || o != spool.OutcomeDuplicate {
		t.Errorf("ClaimOutcome(c5) = %s, %v, %v", o, ok, err)
	}
	// The cost: m1 is forgotten, so a redelivery is processed again.
	again := message("c7", "m1-late.json", 13, "m1", `{"msg_id":"m1"}`)
	if r := mustRecord(t, db, again)[0]; r.Outcome != spool.OutcomeProcessed {
		t.Errorf("redelivery after the window: %s, want processed", r.Outcome)
	}
	// Pruning again finds nothing more.
	if n, err := db.Fsck().Prune(ctx, ledger.Prune{Before: before, KeepClaims: keep}); err != nil || n.Total() != 0 {
		t.Errorf("second prune = %+v, %v; want nothing", n, err)
	}
}

func testPruneWithoutKeep(t *testing.T, db *ledger.DB) {
	before := pruneFixture(t, db)
	got, err := db.Fsck().Prune(t.Context(), ledger.Prune{Before: before})
	if err != nil {
		t.Fatal(err)
	}
	if want := (ledger.Pruned{Processed: 2, Deliveries: 3}); got != want {
		t.Errorf("prune = %+v, want %+v", got, want)
	}
	if got, want := ledgerState(t, db), []string{"d:c4:dead-letter", "p:m3"}; !slices.Equal(got, want) {
		t.Errorf("after prune: %v, want %v", got, want)
	}
}

func testPruneRefuses(t *testing.T, db *ledger.DB) {
	pruneFixture(t, db)
	start := ledgerState(t, db)
	if _, err := db.Fsck().Prune(t.Context(), ledger.Prune{}); err == nil {
		t.Error("Prune without Before: nil error")
	}
	many := make([]string, ledger.MaxPruneKeep+1)
	for i := range many {
		many[i] = fmt.Sprint("c", i+1)
	}
	_, err := db.Fsck().Prune(t.Context(), ledger.Prune{Before: time.Now(), KeepClaims: many})
	if !errors.Is(err, ledger.ErrTooManyInFlight) {
		t.Errorf("Prune with %d in flight: %v, want ErrTooManyInFlight", len(many), err)
	}
	if got := ledgerState(t, db); !slices.Equal(got, start) {
		t.Errorf("a refused prune changed the ledger")
	}
}

func testHistoryAfterClose(t *testing.T, db *ledger.DB) {
	db.Close()
	ctx := t.Context()
	for name, err := range map[string]error{
		"DeadLetterHistory": second(db.DeadLetters().History(ctx, 1)),
		"Replays":           second(db.Replays().List(ctx)),
		"Conflicts":         second(db.Messages().Conflicts(ctx)),
		"ProcessedIDs":      second(db.Messages().ProcessedIDs(ctx, []string{"x"})),
		"Prune":             second(db.Fsck().Prune(ctx, ledger.Prune{Before: time.Now()})),
	} {
		if !errors.Is(err, spool.ErrLedgerClosed) {
			t.Errorf("%s after Close: %v, want ErrLedgerClosed", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }
