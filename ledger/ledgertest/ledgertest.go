// Package ledgertest is the conformance suite every ledger backend must pass.
// A backend's test calls Run with a function that opens a fresh, empty
// ledger; the suite then checks, on that engine, everything the consumer and
// the reports rely on: I2 (one processed row per msg_id, even under
// concurrency), exact money, dead-letter records (I4), claim lookups (I7),
// all-or-nothing batches, business handlers in the batch's transaction
// (committed and rolled back with it, one savepoint per message, retries
// recorded as the consumer decides them and RetrySchedule), and the report
// queries.
package ledgertest

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// Backend is what the suite needs of a backend.
type Backend struct {
	// Fresh makes a new, empty database for one test, dropped when the
	// test ends (t.Cleanup), and returns the DSN by which ledger.Open
	// opens a ledger on it (the backend's package is imported by its
	// test, so it is registered). The suite opens it more than once for
	// the tests of several handles. Subtests run in parallel, so each
	// database must be independent of every other. A backend whose
	// server is not configured skips the test (and fails it on CI).
	Fresh func(t *testing.T) string
	// ByteOrder reports whether db sorts text in byte order (SQLite;
	// PostgreSQL under a "C" collation; a binary column on MySQL), so
	// that OrderCheckSQL's own ORDER BY gives Messages.OrderCheck's order. Nil:
	// only the order within each order_no is checked.
	ByteOrder func(t *testing.T, db *ledger.DB) bool
}

// Run runs the conformance suite on b. It closes each ledger it opens
// when its subtest ends.
func Run(t *testing.T, b Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, db *ledger.DB)
	}{
		{"ProcessedThenDuplicateInOneBatch", testDuplicateInBatch},
		{"DuplicateAcrossBatches", testDuplicateAcrossBatches},
		{"RecordMixed", testRecordMixed},
		{"RecordBatchMixed", testRecordBatchMixed},
		{"DeadLetter", testDeadLetter},
		{"ClaimOutcome", testClaimOutcome},
		{"AmountExact", testAmountExact},
		{"ProcessedRow", testProcessedRow},
		{"OptionalFieldsNull", testOptionalFieldsNull},
		{"Duplicates", testDuplicates},
		{"DeadLetterByInode", testDeadLetterByIno},
		{"EachDeadLetterFile", testEachDeadLetterFile},
		{"Stats", testStats},
		{"RecordReplay", testRecordReplay},
		{"Discard", testDiscard},
		{"OrderCheckSQLAgrees", testOrderCheckSQLAgrees},
		{"FailingBatchCommitsNothing", testFailingBatch},
		{"ClaimRecordedTwice", testClaimRecordedTwice},
		{"BadDelivery", testBadDelivery},
		{"EmptyBatch", testEmptyBatch},
		{"UncleanText", testUncleanText},
		{"Views", testViews},
		{"Closed", testClosed},
		{"Concurrent", testConcurrent},
		{"WorkCommitsTogether", testWorkCommitsTogether},
		{"WorkRollsBackTogether", testWorkRollsBackTogether},
		{"WorkSavepoint", testWorkSavepoint},
		{"RetryScheduled", testRetryScheduled},
		{"RetryDue", testRetryDue},
		{"BadVerdict", testBadVerdict},
		{"ReserveSettle", testReserveSettle},
		{"SettleLostReservation", testSettleLostReservation},
		{"ReleaseReservations", testReleaseReservations},
		{"ReleaseClaims", testReleaseClaims},
		{"ConflictResult", testConflictResult},
		{"OutboxEmit", testOutboxEmit},
		{"Headers", testHeaders},
		{"OutboxRelay", testOutboxRelay},
		{"OutboxHeads", testOutboxHeads},
		{"OutboxBatch", testOutboxBatch},
		{"OutboxRowsEach", testOutboxRowsEach},
		{"OutboxMarkRuns", testOutboxMarkRuns},
		{"OutboxCommitOrder", testOutboxCommitOrder},
		{"Rebuild", testRebuild},
		{"RepairDoneOrder", testRepairDoneOrder},
		{"LongKey", testLongKey},
		{"LongFields", testLongFields},
		{"EmitLimits", testEmitLimits},
		{"ExactKeys", testExactKeys},
		{"AuditLifecycle", testAuditLifecycle},
		{"AuditFilters", testAuditFilters},
		{"AuditText", testAuditText},
		{"AuditConcurrent", testAuditConcurrent},
		{"AuditSpan", testAuditSpan},
		{"Snapshot", testSnapshot},
		{"PruneFiles", testPruneFiles},
		{"PruneBatchProgress", testPruneBatchProgress},
		{"Tasks", testTasks},
		{"StartTasks", testStartTasks},
		{"ApprovalPolicy", testApprovalPolicy},
		{"DeadLetterPage", testDeadLetterPage},
		{"DeadLetterExits", testDeadLetterExits},
		{"DeadLetterInodeReused", testDeadLetterInodeReused},
		{"PruneHorizon", testPruneHorizon},
		{"RejectKey", testRejectKey},
		{"Holds", testHolds},
		{"BatchProgress", testBatchProgress},
	}
	opener := func(t *testing.T, dsn string) *ledger.DB {
		t.Helper()
		db, err := ledger.Open(t.Context(), dsn, ledger.OpenOptions{})
		if err != nil {
			t.Fatalf("open %s: %v", dsn, err)
		}
		t.Cleanup(func() {
			if err := db.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
		return db
	}
	fresh := func(t *testing.T) *ledger.DB { return opener(t, b.Fresh(t)) }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, fresh(t))
		})
	}
	t.Run("OrderCheck", func(t *testing.T) {
		t.Parallel()
		testOrderCheck(t, fresh)
	})
	t.Run("OrderCheckSQLOrder", func(t *testing.T) {
		t.Parallel()
		testOrderCheckSQLOrder(t, fresh(t), b.ByteOrder)
	})
	t.Run("TwoHandles", func(t *testing.T) {
		t.Parallel()
		dsn := b.Fresh(t)
		testTwoHandles(t, opener(t, dsn), opener(t, dsn))
	})
	t.Run("Leases", func(t *testing.T) {
		t.Parallel()
		dsn := b.Fresh(t)
		testLeases(t, opener(t, dsn), opener(t, dsn))
	})
	t.Run("HoldRace", func(t *testing.T) {
		t.Parallel()
		dsn := b.Fresh(t)
		testHoldRace(t, opener(t, dsn), opener(t, dsn))
	})
	t.Run("AuditBind", func(t *testing.T) {
		t.Parallel()
		dsn := b.Fresh(t)
		testAuditBind(t, opener(t, dsn), opener(t, dsn))
	})
	t.Run("ConcurrentOpen", func(t *testing.T) {
		t.Parallel()
		testConcurrentOpen(t, b.Fresh(t))
	})
}

var inodes atomic.Uint64

// msg is a valid message; zero OrderNo, Seq or Amount leave the field out.
type msg struct {
	ID      string
	OrderNo string
	Seq     int64
	Amount  string
}

// valid returns the delivery of a valid message under claim.
func valid(claim string, m msg) *spool.Delivery {
	raw := `{"msg_id":` + strconv.Quote(m.ID)
	if m.OrderNo != "" {
		raw += `,"order_no":` + strconv.Quote(m.OrderNo)
	}
	if m.Seq != 0 {
		raw += `,"seq":` + strconv.FormatInt(m.Seq, 10)
	}
	if m.Amount != "" {
		raw += `,"amount":` + m.Amount
	}
	raw += `,"note":"kept"}`
	sum := sha256.Sum256([]byte(raw))
	return &spool.Delivery{
		Claim:    claim,
		File:     m.ID + ".json",
		Ino:      1000 + inodes.Add(1),
		Consumer: "host/1/test",
		Hash:     hex.EncodeToString(sum[:]),
		Size:     int64(len(raw)),
		Message: &spool.Message{
			MsgID: m.ID, OrderNo: m.OrderNo, Seq: m.Seq, Amount: spool.Amount(m.Amount),
			Raw: []byte(raw),
		},
		At: time.Now(),
	}
}

// rejected returns the delivery of a poison message under claim.
func rejected(claim, file string, ino uint64, reason spool.Reason, field, detail string) *spool.Delivery {
	return &spool.Delivery{
		Claim:    claim,
		File:     file,
		Ino:      ino,
		Consumer: "host/1/test",
		Size:     3,
		Reject:   &spool.RejectError{Reason: reason, Field: field, Detail: detail},
		At:       time.Now(),
	}
}

// record records batch and returns its results, one per delivery.
func record(t *testing.T, db *ledger.DB, batch ...*spool.Delivery) []spool.Result {
	t.Helper()
	res, err := db.Consumer().Record(t.Context(), batch, spool.Work{})
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	if len(res) != len(batch) {
		t.Fatalf("Record: %d results for %d deliveries", len(res), len(batch))
	}
	return res
}

func outcomes(res ...spool.Result) []spool.Outcome {
	out := make([]spool.Outcome, len(res))
	for i, r := range res {
		out[i] = r.Outcome
	}
	return out
}

func processedRow(t *testing.T, db *ledger.DB, msgID string) (ledger.Row, bool) {
	t.Helper()
	r, ok, err := db.Messages().Processed(t.Context(), msgID)
	if err != nil {
		t.Fatalf("Processed(%q): %v", msgID, err)
	}
	return r, ok
}

func claimOutcome(t *testing.T, db *ledger.DB, claim, msgID string) (spool.Outcome, bool) {
	t.Helper()
	o, ok, err := db.Consumer().ClaimOutcome(t.Context(), claim, msgID)
	if err != nil {
		t.Fatalf("ClaimOutcome(%q, %q): %v", claim, msgID, err)
	}
	return o, ok
}

func stats(t *testing.T, db *ledger.DB) ledger.Stats {
	t.Helper()
	st, err := db.Messages().Stats(t.Context())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st
}

func count(t *testing.T, db *ledger.DB, query string) int64 {
	t.Helper()
	var n int64
	if err := db.SQL().QueryRowContext(t.Context(), query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func testDuplicateInBatch(t *testing.T, db *ledger.DB) {
	first := valid("c1", msg{ID: "m1", OrderNo: "A", Seq: 1, Amount: "1.00"})
	second := valid("c2", msg{ID: "m1", OrderNo: "A", Seq: 1, Amount: "1.00"})
	res := record(t, db, first, second)
	if got, want := outcomes(res...), []spool.Outcome{spool.OutcomeProcessed, spool.OutcomeDuplicate}; !reflect.DeepEqual(got, want) {
		t.Fatalf("outcomes = %v, want %v", got, want)
	}
	r, ok := processedRow(t, db, "m1")
	if !ok {
		t.Fatal("Processed(m1): not found")
	}
	if r.Claim != "c1" {
		t.Errorf("processed row's claim = %q, want c1 (the earlier delivery wins)", r.Claim)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM processed"); n != 1 {
		t.Errorf("processed rows = %d, want 1", n)
	}
}

func testDuplicateAcrossBatches(t *testing.T, db *ledger.DB) {
	first := valid("c1", msg{ID: "m1", OrderNo: "A", Seq: 1, Amount: "5"})
	res := record(t, db, first)
	second := valid("c2", msg{ID: "m1", OrderNo: "A", Seq: 1, Amount: "5"})
	other := valid("c3", msg{ID: "m2", OrderNo: "A", Seq: 2, Amount: "5"})
	res = append(res, record(t, db, second, other)...)
	if got, want := outcomes(res...), []spool.Outcome{spool.OutcomeProcessed, spool.OutcomeDuplicate, spool.OutcomeProcessed}; !reflect.DeepEqual(got, want) {
		t.Fatalf("outcomes = %v, want %v", got, want)
	}
	if o, ok := claimOutcome(t, db, "c2", "m1"); !ok || o != spool.OutcomeDuplicate {
		t.Errorf("ClaimOutcome(c2) = %q, %v, want duplicate, true", o, ok)
	}
	if r, _ := processedRow(t, db, "m1"); r.Claim != "c1" {
		t.Errorf("processed row's claim = %q, want c1", r.Claim)
	}
}

func testDeadLetter(t *testing.T, db *ledger.DB) {
	d := rejected("c1", "bad.json", 77, spool.ReasonInvalidField, "seq", "seq must be an integer >= 1, got 0")
	if r := record(t, db, d)[0]; r.Outcome != spool.OutcomeDeadLetter || r.Reject == nil || *r.Reject != *d.Reject {
		t.Fatalf("result = %+v, want dead-letter with the delivery's reject", r)
	}
	dl, ok, err := deadLetterOf(t, db, 77)
	if err != nil || !ok {
		t.Fatalf("deadLetterOf(77) = %v, %v", ok, err)
	}
	want := deadLetterRow{
		File: "bad.json", Reason: spool.ReasonInvalidField, Field: "seq",
		Detail: "seq must be an integer >= 1, got 0",
		Claim:  "c1", Consumer: "host/1/test",
	}
	if !reflect.DeepEqual(dl, want) {
		t.Errorf("deadLetterOf(77) =\n%+v\nwant\n%+v", dl, want)
	}
	// A dead letter never touches processed.
	if n := count(t, db, "SELECT COUNT(*) FROM processed"); n != 0 {
		t.Errorf("processed rows = %d, want 0", n)
	}
	// No field, no detail: stored as NULL, read back empty.
	bare := rejected("c2", "empty.json", 78, spool.ReasonParse, "", "")
	record(t, db, bare)
	dl, ok, err = deadLetterOf(t, db, 78)
	if err != nil || !ok {
		t.Fatalf("deadLetterOf(78) = %v, %v", ok, err)
	}
	if dl.Reason != spool.ReasonParse || dl.Field != "" || dl.Detail != "" {
		t.Errorf("bare dead letter = %+v, want reason parse and no field or detail", dl)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM deliveries WHERE field IS NULL AND detail IS NULL AND msg_id IS NULL"); n != 1 {
		t.Errorf("dead letters with NULL field, detail and msg_id = %d, want 1", n)
	}
}

func testClaimOutcome(t *testing.T, db *ledger.DB) {
	record(t, db,
		valid("c1", msg{ID: "m1", OrderNo: "A", Seq: 1, Amount: "1"}),
		valid("c2", msg{ID: "m1", OrderNo: "A", Seq: 1, Amount: "1"}),
		rejected("c3", "x.json", 5, spool.ReasonParse, "", "not JSON"))
	// A processed claim is found through its message's key; the other
	// outcomes through the claim alone, whatever key is given.
	for _, tc := range []struct {
		claim, msgID string
		want         spool.Outcome
		found        bool
	}{
		{"c1", "m1", spool.OutcomeProcessed, true},
		{"c1", "", "", false},   // a processed claim needs its key
		{"c1", "m2", "", false}, // and the right one
		{"c2", "m1", spool.OutcomeDuplicate, true},
		{"c2", "", spool.OutcomeDuplicate, true},
		{"c3", "", spool.OutcomeDeadLetter, true},
		{"c3", "m1", spool.OutcomeDeadLetter, true},
		{"c4", "m1", "", false}, // m1 was processed by another claim
		{"c4", "", "", false},
		{"", "", "", false},
	} {
		if got, found := claimOutcome(t, db, tc.claim, tc.msgID); got != tc.want || found != tc.found {
			t.Errorf("ClaimOutcome(%q, %q) = %q, %v, want %q, %v", tc.claim, tc.msgID, got, found, tc.want, tc.found)
		}
	}
	// Why a claim was dead-lettered, for recovery to report it; nothing
	// for the claims of other outcomes.
	rej, ok, err := db.Consumer().ClaimReject(t.Context(), "c3")
	if err != nil || !ok || rej.Reason != spool.ReasonParse || rej.Detail != "not JSON" || rej.Field != "" {
		t.Errorf("ClaimReject(c3) = %+v, %v, %v; want parse, not JSON", rej, ok, err)
	}
	for _, claim := range []string{"c1", "c2", "c4"} {
		if rej, ok, err := db.Consumer().ClaimReject(t.Context(), claim); err != nil || ok || rej != nil {
			t.Errorf("ClaimReject(%s) = %+v, %v, %v; want not found", claim, rej, ok, err)
		}
	}
}

func testAmountExact(t *testing.T, db *ledger.DB) {
	amounts := []string{"12345678901234567.89", "-0.10", "0.1000", "1E+400", "100", "-0", "0.30000000000000004"}
	var batch []*spool.Delivery
	for i, a := range amounts {
		batch = append(batch, valid(fmt.Sprintf("c%d", i), msg{ID: fmt.Sprintf("m%d", i), OrderNo: "A", Seq: int64(i + 1), Amount: a}))
	}
	record(t, db, batch...)
	for i, want := range amounts {
		r, ok := processedRow(t, db, fmt.Sprintf("m%d", i))
		if !ok {
			t.Fatalf("Processed(m%d): not found", i)
		}
		if string(r.Amount) != want {
			t.Errorf("amount of m%d = %q, want %q", i, r.Amount, want)
		}
	}
	// The column must hold text, not a number the engine could round.
	if n := count(t, db, "SELECT COUNT(*) FROM processed WHERE amount = '12345678901234567.89'"); n != 1 {
		t.Errorf("rows with amount text '12345678901234567.89' = %d, want 1", n)
	}
}

func testProcessedRow(t *testing.T, db *ledger.DB) {
	d := valid("claim-1", msg{ID: "m-42", OrderNo: "ORD-7", Seq: 3, Amount: "-12.50"})
	before := time.Now().UTC().Truncate(time.Microsecond)
	record(t, db, d)
	after := time.Now().UTC()
	r, ok := processedRow(t, db, "m-42")
	if !ok {
		t.Fatal("Processed(m-42): not found")
	}
	if r.ProcessedAt.Before(before) || r.ProcessedAt.After(after) || r.ProcessedAt.Location() != time.UTC {
		t.Errorf("ProcessedAt = %v, want UTC within [%v, %v]", r.ProcessedAt, before, after)
	}
	r.ProcessedAt = time.Time{}
	want := ledger.Row{
		MsgID: "m-42", OrderNo: "ORD-7", Seq: 3, Amount: "-12.50",
		File: "m-42.json", ContentHash: d.Hash, Payload: string(d.Message.Raw), Claim: "claim-1",
	}
	if r != want {
		t.Errorf("Processed(m-42) =\n%+v\nwant\n%+v", r, want)
	}
	if _, ok := processedRow(t, db, "m-43"); ok {
		t.Error("Processed(m-43): found, want not found")
	}
	// Timestamps are fixed-width text, so they sort as text.
	var at string
	if err := db.SQL().QueryRowContext(t.Context(), "SELECT processed_at FROM processed").Scan(&at); err != nil {
		t.Fatal(err)
	}
	if len(at) != len(ledger.TimeLayout) || !strings.HasSuffix(at, "Z") {
		t.Errorf("processed_at = %q, want the layout %q", at, ledger.TimeLayout)
	}
}

func testOptionalFieldsNull(t *testing.T, db *ledger.DB) {
	d := valid("c1", msg{ID: "bare"})
	d.Hash = "" // not given: the ledger computes it from the payload
	if r := record(t, db, d)[0]; r.Outcome != spool.OutcomeProcessed {
		t.Fatalf("outcome = %q, want processed", r.Outcome)
	}
	r, ok := processedRow(t, db, "bare")
	if !ok {
		t.Fatal("Processed(bare): not found")
	}
	if r.OrderNo != "" || r.Seq != 0 || r.Amount != "" {
		t.Errorf("row = %+v, want empty order_no, seq and amount", r)
	}
	sum := sha256.Sum256(d.Message.Raw)
	if want := hex.EncodeToString(sum[:]); r.ContentHash != want {
		t.Errorf("content hash = %q, want %q", r.ContentHash, want)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM processed WHERE order_no IS NULL AND seq IS NULL AND amount IS NULL"); n != 1 {
		t.Errorf("rows with NULL order_no, seq and amount = %d, want 1", n)
	}
	// A processed delivery is recorded by its processed row alone; the
	// claims view shows it with the hash the ledger computed.
	if n := count(t, db, "SELECT COUNT(*) FROM deliveries"); n != 0 {
		t.Errorf("deliveries rows = %d, want 0 (a processed delivery has only its processed row)", n)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM claims WHERE claim = 'c1' AND outcome = 'processed' AND content_hash = '"+r.ContentHash+"'"); n != 1 {
		t.Errorf("claims rows for c1 with its hash = %d, want 1", n)
	}
}

func testDuplicates(t *testing.T, db *ledger.DB) {
	ids := []string{"b", "a", "Z", "é", "10", "9", "B", "a-1"}
	var first, again []*spool.Delivery
	for i, id := range ids {
		first = append(first, valid(fmt.Sprintf("first-%d", i), msg{ID: id}))
		again = append(again, valid(fmt.Sprintf("again-%d", i), msg{ID: id}))
	}
	// "b" and "10" come back a third time: still listed once.
	again = append(again, valid("third-b", msg{ID: "b"}), valid("third-10", msg{ID: "10"}))
	record(t, db, first...)
	got, err := db.Messages().Duplicates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("Duplicates before any = %q, want none", got)
	}
	record(t, db, again...)
	// A processed message and a dead letter are not duplicates.
	record(t, db, valid("only", msg{ID: "only"}), rejected("dead", "dead.json", 1, spool.ReasonParse, "", "x"))
	got, err = db.Messages().Duplicates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10", "9", "B", "Z", "a", "a-1", "b", "é"} // byte order
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Duplicates = %q, want %q", got, want)
	}
}

// deadLetterRow is what deliveries holds of a dead letter.
type deadLetterRow struct {
	File            string
	Reason          spool.Reason
	Field, Detail   string
	Claim, Consumer string
}

// deadLetterOf reads the latest dead-letter delivery of the file with
// inode ino (latest by id, the ledger's own commit order): the inode is
// how a file renamed in error/ is found again.
func deadLetterOf(t *testing.T, db *ledger.DB, ino uint64) (deadLetterRow, bool, error) {
	t.Helper()
	var (
		dl            deadLetterRow
		reason        string
		field, detail sql.NullString
	)
	err := db.SQL().QueryRowContext(t.Context(), db.Dialect().Rebind(`SELECT file, reason, field, detail, claim, consumer
FROM deliveries WHERE outcome = 'dead-letter' AND ino = ? ORDER BY id DESC LIMIT 1`), int64(ino)).
		Scan(&dl.File, &reason, &field, &detail, &dl.Claim, &dl.Consumer)
	if errors.Is(err, sql.ErrNoRows) {
		return deadLetterRow{}, false, nil
	}
	dl.Reason, dl.Field, dl.Detail = spool.Reason(reason), field.String, detail.String
	return dl, err == nil, err
}

func testDeadLetterByIno(t *testing.T, db *ledger.DB) {
	const big = uint64(1)<<63 + 5 // above int64: must survive the BIGINT column
	record(t, db, rejected("c1", "a.json", 42, spool.ReasonParse, "", "first"))
	record(t, db,
		rejected("c2", "a~2.json", 42, spool.ReasonMissingField, "amount", "second"),
		rejected("c3", "huge.json", big, spool.ReasonTooLarge, "", "2000000 bytes"))
	// A later processed delivery that reuses the inode is not a dead letter.
	p := valid("c4", msg{ID: "m1"})
	p.Ino = 42
	record(t, db, p)

	dl, ok, err := deadLetterOf(t, db, 42)
	if err != nil || !ok {
		t.Fatalf("deadLetterOf(42) = %v, %v", ok, err)
	}
	if dl.Claim != "c2" || dl.File != "a~2.json" || dl.Reason != spool.ReasonMissingField || dl.Field != "amount" || dl.Detail != "second" {
		t.Errorf("deadLetterOf(42) = %+v, want the latest: claim c2, a~2.json, missing-field, amount, second", dl)
	}
	dl, ok, err = deadLetterOf(t, db, big)
	if err != nil || !ok {
		t.Fatalf("deadLetterOf(2^63+5) = %v, %v", ok, err)
	}
	if dl.Claim != "c3" || dl.Reason != spool.ReasonTooLarge {
		t.Errorf("deadLetterOf(2^63+5) = %+v, want claim c3, too-large", dl)
	}
	for _, ino := range []uint64{0, 43, 5} {
		if dl, ok, err := deadLetterOf(t, db, ino); err != nil || ok {
			t.Errorf("deadLetterOf(%d) = %+v, %v, %v, want not found", ino, dl, ok, err)
		}
	}
}

func testStats(t *testing.T, db *ledger.DB) {
	st := stats(t, db)
	if want := (ledger.Stats{DeadLettersByReason: map[spool.Reason]int64{}}); !reflect.DeepEqual(st, want) {
		t.Errorf("Stats of an empty ledger = %+v, want %+v", st, want)
	}
	record(t, db,
		valid("c1", msg{ID: "m1"}), valid("c2", msg{ID: "m2"}), valid("c3", msg{ID: "m3"}),
		valid("c4", msg{ID: "m1"}), valid("c5", msg{ID: "m1"}), valid("c6", msg{ID: "m2"}),
		rejected("c7", "a.json", 1, spool.ReasonParse, "", "x"),
		rejected("c8", "b.json", 2, spool.ReasonParse, "", "y"),
		rejected("c9", "c.json", 3, spool.ReasonInvalidField, "seq", "z"))
	want := ledger.Stats{
		Processed: 3, Duplicates: 3, DeadLetters: 3,
		DeadLettersByReason: map[spool.Reason]int64{spool.ReasonParse: 2, spool.ReasonInvalidField: 1},
	}
	if st := stats(t, db); !reflect.DeepEqual(st, want) {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}
}

func testRecordReplay(t *testing.T, db *ledger.DB) {
	at := time.Date(2025, 3, 1, 12, 30, 45, 123456789, time.FixedZone("CET", 3600))
	if err := db.Replays().Record(t.Context(), ledger.Replay{File: "a.json", NewName: "a~2.json", Ino: 9, By: "alice", Note: "fixed upstream", At: at}); err != nil {
		t.Fatal(err)
	}
	if err := db.Replays().Record(t.Context(), ledger.Replay{File: "b.json", NewName: "b.json", By: "bob"}); err != nil {
		t.Fatal(err)
	}
	if err := db.Replays().Record(t.Context(), ledger.Replay{File: "c.json", NewName: "c.json"}); err == nil {
		t.Error("Replays().Record without By: nil error, want one")
	}
	rows, err := db.SQL().QueryContext(t.Context(), "SELECT file, new_name, ino, by_user, note, at FROM replays ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var file, newName, by, at string
		var ino *int64
		var note *string
		if err := rows.Scan(&file, &newName, &ino, &by, &note, &at); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%s %s %v %s %v", file, newName, deref(ino), by, deref(note))
		if file == "a.json" {
			line += " " + at
		} else if _, err := time.Parse(ledger.TimeLayout, at); err != nil {
			t.Errorf("replay at = %q: %v", at, err)
		}
		got = append(got, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"a.json a~2.json 9 alice fixed upstream 2025-03-01T11:30:45.123456Z",
		"b.json b.json <nil> bob <nil>",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("replays =\n%q\nwant\n%q", got, want)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
