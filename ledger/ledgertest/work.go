package ledgertest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// The handlers of these tests write to a table of their own, through the
// ledger's transaction, so that what commits with a batch can be seen.
const workTable = `CREATE TABLE work (msg_id VARCHAR(255) NOT NULL PRIMARY KEY, note TEXT NOT NULL)`

// workRow is a handler's business write.
func workRow(ctx context.Context, db *ledger.DB, tx *sql.Tx, msgID, note string) error {
	_, err := tx.ExecContext(ctx, db.Dialect().Rebind(`INSERT INTO work (msg_id, note) VALUES (?, ?)`), msgID, note)
	return err
}

// newWork creates the work table and returns a handler that writes its row
// for each message and then fails as fail says (nil: succeeds), and the
// deliveries it was called with.
func newWork(t *testing.T, db *ledger.DB, fail func(m *spool.Message) error) (spool.Handler, func() []*spool.Delivery) {
	t.Helper()
	if _, err := db.SQL().ExecContext(t.Context(), workTable); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var calls []*spool.Delivery
	h := spool.HandlerFunc(func(ctx context.Context, tx *sql.Tx, d *spool.Delivery) error {
		mu.Lock()
		calls = append(calls, d)
		mu.Unlock()
		if err := workRow(ctx, db, tx, d.Message.MsgID, "written"); err != nil {
			return err
		}
		if fail != nil {
			return fail(d.Message)
		}
		return nil
	})
	return h, func() []*spool.Delivery {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
}

// decider is a Work.Decide that returns a fixed verdict and remembers the
// failures it was asked about.
type decider struct {
	mu       sync.Mutex
	verdict  func(f spool.Failure) spool.Verdict
	failures []spool.Failure
}

func (d *decider) decide(f spool.Failure) spool.Verdict {
	d.mu.Lock()
	d.failures = append(d.failures, f)
	d.mu.Unlock()
	return d.verdict(f)
}

// retryIn is a verdict function: a retry after wait, from the failure.
func retryIn(wait time.Duration) func(spool.Failure) spool.Verdict {
	return func(f spool.Failure) spool.Verdict {
		return spool.Verdict{Outcome: spool.OutcomeRetry, RetryAt: f.At.Add(wait)}
	}
}

// deadLetter is a verdict function: a dead letter with reason.
func deadLetter(reason spool.Reason) func(spool.Failure) spool.Verdict {
	return func(spool.Failure) spool.Verdict {
		return spool.Verdict{Outcome: spool.OutcomeDeadLetter, Reason: reason}
	}
}

func recordWork(t *testing.T, db *ledger.DB, w spool.Work, batch ...*spool.Delivery) []spool.Result {
	t.Helper()
	res, err := db.Consumer().Record(t.Context(), batch, w)
	if err != nil {
		t.Fatalf("Record: %v", err)
	}
	if len(res) != len(batch) {
		t.Fatalf("Record: %d results for %d deliveries", len(res), len(batch))
	}
	return res
}

// column returns the first column of query's rows, as text.
func column(t *testing.T, db *ledger.DB, query string) []string {
	t.Helper()
	rows, err := db.SQL().QueryContext(t.Context(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
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
	return out
}

// testWorkCommitsTogether: a handler's writes commit with the batch; it is
// called once per first delivery, with that delivery, and never for a
// duplicate, in the batch or across batches.
func testWorkCommitsTogether(t *testing.T, db *ledger.DB) {
	h, calls := newWork(t, db, nil)
	w := spool.Work{Handler: h, Decide: (&decider{verdict: deadLetter(spool.ReasonHandler)}).decide}
	a, b := valid("c1", msg{ID: "m1"}), valid("c2", msg{ID: "m2"})
	again := valid("c3", msg{ID: "m1"})
	res := recordWork(t, db, w, a, again, b)
	if got, want := outcomes(res...), []spool.Outcome{spool.OutcomeProcessed, spool.OutcomeDuplicate, spool.OutcomeProcessed}; !reflect.DeepEqual(got, want) {
		t.Errorf("outcomes = %q, want %q", got, want)
	}
	res = recordWork(t, db, w, valid("c4", msg{ID: "m2"}))
	if res[0].Outcome != spool.OutcomeDuplicate {
		t.Errorf("a later batch's redelivery: %q, want duplicate", res[0].Outcome)
	}
	got := calls()
	slices.SortFunc(got, func(x, y *spool.Delivery) int { return strings.Compare(x.Claim, y.Claim) })
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("handler called with %d deliveries, want the two first deliveries, a and b", len(got))
	}
	if got, want := column(t, db, "SELECT msg_id FROM work ORDER BY msg_id"), []string{"m1", "m2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("work rows = %q, want %q", got, want)
	}
	if got, want := column(t, db, "SELECT msg_id FROM processed ORDER BY msg_id"), []string{"m1", "m2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("processed rows = %q, want %q", got, want)
	}
	// Without a handler, Record records alone.
	if res := recordWork(t, db, spool.Work{}, valid("c5", msg{ID: "m5"})); res[0].Outcome != spool.OutcomeProcessed {
		t.Errorf("Record without a handler: %q, want processed", res[0].Outcome)
	}
}

// testWorkRollsBackTogether: a handler's writes roll back with its own
// message when the handler fails, and with the whole batch when the batch
// fails, however far the other handlers got.
func testWorkRollsBackTogether(t *testing.T, db *ledger.DB) {
	h, _ := newWork(t, db, func(m *spool.Message) error {
		if m.MsgID == "bad" {
			return spool.Permanent(errors.New("order closed"))
		}
		return nil
	})
	w := spool.Work{Handler: h, Decide: (&decider{verdict: deadLetter(spool.ReasonHandler)}).decide}
	res := recordWork(t, db, w, valid("c1", msg{ID: "bad"}), valid("c2", msg{ID: "good"}))
	if got, want := outcomes(res...), []spool.Outcome{spool.OutcomeDeadLetter, spool.OutcomeProcessed}; !reflect.DeepEqual(got, want) {
		t.Errorf("outcomes = %q, want %q", got, want)
	}
	if got, want := column(t, db, "SELECT msg_id FROM work"), []string{"good"}; !reflect.DeepEqual(got, want) {
		t.Errorf("work rows = %q, want %q: the failed handler's write must roll back", got, want)
	}
	if _, ok := processedRow(t, db, "bad"); ok {
		t.Error("Processed(bad) found: the failed handler's processed row must roll back")
	}
	// A batch that fails after its handlers ran (c1's claim was recorded
	// already) commits none of their writes.
	_, err := db.Consumer().Record(t.Context(), []*spool.Delivery{valid("c3", msg{ID: "later"}), valid("c2", msg{ID: "good"})}, w)
	if err == nil {
		t.Fatal("Record with a handler and a claim recorded twice: nil error, want one")
	}
	if got, want := column(t, db, "SELECT msg_id FROM work"), []string{"good"}; !reflect.DeepEqual(got, want) {
		t.Errorf("work rows after a failed batch = %q, want %q", got, want)
	}
	if _, ok := processedRow(t, db, "later"); ok {
		t.Error("Processed(later) found after a failed batch")
	}
}

// testWorkSavepoint: a handler whose SQL fails is undone by rolling back to
// its message's savepoint, which also takes back its earlier writes and
// the processed row, and nothing else of the batch: on PostgreSQL the
// failed statement aborts the transaction until then. The messages after
// it still commit, and a duplicate in the batch does not run the handler
// again.
func testWorkSavepoint(t *testing.T, db *ledger.DB) {
	if _, err := db.SQL().ExecContext(t.Context(), workTable); err != nil {
		t.Fatal(err)
	}
	var calls []string
	h := spool.HandlerFunc(func(ctx context.Context, tx *sql.Tx, d *spool.Delivery) error {
		calls = append(calls, d.Message.MsgID)
		if err := workRow(ctx, db, tx, d.Message.MsgID, "written"); err != nil {
			return err
		}
		switch d.Message.MsgID {
		case "a-sql-error":
			// A NOT NULL violation: PostgreSQL aborts the transaction.
			_, err := tx.ExecContext(ctx, db.Dialect().Rebind(`INSERT INTO work (msg_id, note) VALUES (?, NULL)`), d.Message.MsgID+"-2")
			if err == nil {
				return errors.New("insert of a NULL note succeeded")
			}
			return spool.Permanent(fmt.Errorf("book order: %w", err))
		case "b-permanent":
			return spool.Permanent(errors.New("order rejected"))
		case "c-transient":
			return errors.New("service unavailable")
		}
		return nil
	})
	dec := &decider{verdict: func(f spool.Failure) spool.Verdict {
		if spool.IsPermanent(f.Err) {
			return spool.Verdict{Outcome: spool.OutcomeDeadLetter, Reason: spool.ReasonHandler}
		}
		return spool.Verdict{Outcome: spool.OutcomeRetry, RetryAt: f.At.Add(time.Hour)}
	}}
	batch := []*spool.Delivery{
		valid("c1", msg{ID: "a-sql-error"}),
		valid("c2", msg{ID: "b-permanent"}),
		valid("c3", msg{ID: "c-transient"}),
		valid("c4", msg{ID: "d-ok"}),
		valid("c5", msg{ID: "d-ok"}), // a duplicate in the batch: the handler is not run again
		valid("c6", msg{ID: "e-ok"}),
	}
	res := recordWork(t, db, spool.Work{Handler: h, Decide: dec.decide}, batch...)
	want := []spool.Outcome{spool.OutcomeDeadLetter, spool.OutcomeDeadLetter, spool.OutcomeRetry,
		spool.OutcomeProcessed, spool.OutcomeDuplicate, spool.OutcomeProcessed}
	if got := outcomes(res...); !reflect.DeepEqual(got, want) {
		t.Errorf("outcomes = %q, want %q", got, want)
	}
	for i := range 2 {
		if r := res[i].Reject; r == nil || r.Reason != spool.ReasonHandler || res[i].Attempts != 1 {
			t.Errorf("%s: reject %+v after %d attempts, want reason handler after 1", batch[i].Message.MsgID, r, res[i].Attempts)
		}
	}
	if r := res[0].Reject; r == nil || !strings.HasPrefix(r.Detail, "book order: ") || !strings.Contains(strings.ToLower(r.Detail), "null") {
		t.Errorf("a-sql-error detail = %+v, want the engine's NOT NULL error", r)
	}
	slices.Sort(calls)
	if want := []string{"a-sql-error", "b-permanent", "c-transient", "d-ok", "e-ok"}; !slices.Equal(calls, want) {
		t.Errorf("the handler ran for %q, want each first delivery once: %q", calls, want)
	}
	if got, want := column(t, db, "SELECT msg_id FROM work ORDER BY msg_id"), []string{"d-ok", "e-ok"}; !reflect.DeepEqual(got, want) {
		t.Errorf("work rows = %q, want %q", got, want)
	}
	if got, want := column(t, db, "SELECT msg_id FROM processed ORDER BY msg_id"), []string{"d-ok", "e-ok"}; !reflect.DeepEqual(got, want) {
		t.Errorf("processed rows = %q, want %q", got, want)
	}
	if got, want := column(t, db, "SELECT msg_id FROM attempts"), []string{"c-transient"}; !reflect.DeepEqual(got, want) {
		t.Errorf("attempts rows = %q, want %q: the retry is scheduled in the same transaction", got, want)
	}
	if got, want := column(t, db, "SELECT claim FROM dead_letters WHERE reason = 'handler' ORDER BY claim"), []string{"c1", "c2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("handler dead letters = %q, want %q", got, want)
	}
}

// testRetryScheduled: a failure the consumer decides to retry is recorded
// as told: the attempt counted, the next time as the verdict gave it, in
// RetrySchedule; nothing of the message is processed. Each further failure
// counts one more attempt, and Decide sees the count.
func testRetryScheduled(t *testing.T, db *ledger.DB) {
	h, _ := newWork(t, db, func(*spool.Message) error { return errors.New("service unavailable") })
	dec := &decider{verdict: retryIn(time.Hour)}
	w := spool.Work{Handler: h, Decide: dec.decide}
	before := time.Now()
	r := recordWork(t, db, w, valid("c1", msg{ID: "m1"}), valid("c2", msg{ID: "m2"}))[0]
	after := time.Now()
	if r.Outcome != spool.OutcomeRetry || r.Attempts != 1 || r.Err == nil || r.Err.Error() != "service unavailable" || r.Reject != nil {
		t.Fatalf("result = %+v, want a retry after 1 attempt with the handler's error", r)
	}
	f := dec.failures[0]
	if f.Attempts != 1 || f.Err.Error() != "service unavailable" || f.At.Before(before) || f.At.After(after) {
		t.Errorf("Decide was asked about %+v, want attempt 1 with the handler's error, at the failure", f)
	}
	if !r.RetryAt.Equal(f.At.Add(time.Hour)) {
		t.Errorf("RetryAt = %v, want the verdict's %v", r.RetryAt, f.At.Add(time.Hour))
	}
	sched, err := db.Consumer().RetrySchedule(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(sched) != 2 || !sched["m1"].Equal(r.RetryAt.Truncate(time.Microsecond)) {
		t.Errorf("RetrySchedule = %v, want m1 at %v and m2", sched, r.RetryAt.Truncate(time.Microsecond))
	}
	if n := count(t, db, "SELECT COUNT(*) FROM processed"); n != 0 {
		t.Errorf("processed rows = %d, want 0: a retry records nothing but its attempt", n)
	}
	if o, ok := claimOutcome(t, db, "c1", "m1"); ok {
		t.Errorf("ClaimOutcome(c1) = %q: a retried claim must stay unknown to recovery", o)
	}
	if got := column(t, db, "SELECT msg_id FROM work"); len(got) != 0 {
		t.Errorf("work rows = %q, want none", got)
	}
	// The next attempt, under a new claim, counts on.
	r = recordWork(t, db, w, valid("c3", msg{ID: "m1"}))[0]
	if r.Outcome != spool.OutcomeRetry || r.Attempts != 2 || dec.failures[2].Attempts != 2 {
		t.Errorf("second attempt: %+v, Decide asked about attempt %d; want a retry after 2", r, dec.failures[2].Attempts)
	}
}

// testRetryDue: a retry that falls due and succeeds is processed like a
// first delivery, and leaves the schedule; one that fails for the last
// time is a dead letter with the verdict's reason and the attempts made.
func testRetryDue(t *testing.T, db *ledger.DB) {
	failing := true
	h, _ := newWork(t, db, func(*spool.Message) error {
		if failing {
			return errors.New("locked")
		}
		return nil
	})
	dec := &decider{verdict: retryIn(time.Millisecond)}
	w := spool.Work{Handler: h, Decide: dec.decide}
	recordWork(t, db, w, valid("c1", msg{ID: "ok"}), valid("c2", msg{ID: "gives-up"}))
	sched, err := db.Consumer().RetrySchedule(t.Context())
	if err != nil || len(sched) != 2 {
		t.Fatalf("RetrySchedule = %v, %v, want both", sched, err)
	}

	failing = false
	if r := recordWork(t, db, w, valid("c3", msg{ID: "ok"}))[0]; r.Outcome != spool.OutcomeProcessed || r.Attempts != 0 || r.Err != nil {
		t.Errorf("the due retry that succeeds: %+v, want processed", r)
	}
	failing = true
	dec.verdict = deadLetter(spool.ReasonRetriesExhausted)
	r := recordWork(t, db, w, valid("c4", msg{ID: "gives-up"}))[0]
	if r.Outcome != spool.OutcomeDeadLetter || r.Attempts != 2 || r.Reject == nil ||
		r.Reject.Reason != spool.ReasonRetriesExhausted || r.Reject.Detail != "locked" || !r.RetryAt.IsZero() {
		t.Errorf("the last attempt: %+v, want a retries-exhausted dead letter after 2 attempts", r)
	}
	if sched, err := db.Consumer().RetrySchedule(t.Context()); err != nil || len(sched) != 0 {
		t.Errorf("RetrySchedule after both were decided = %v, %v, want empty", sched, err)
	}
	if got, want := column(t, db, "SELECT msg_id FROM work"), []string{"ok"}; !reflect.DeepEqual(got, want) {
		t.Errorf("work rows = %q, want %q", got, want)
	}
	if o, ok := claimOutcome(t, db, "c4", "gives-up"); !ok || o != spool.OutcomeDeadLetter {
		t.Errorf("ClaimOutcome(c4) = %q, %v, want dead-letter", o, ok)
	}
	if got, want := column(t, db, "SELECT CAST(attempts AS VARCHAR(20)) || ' ' || reason || ' ' || detail FROM deliveries WHERE claim = 'c4'"), []string{"2 retries-exhausted locked"}; !reflect.DeepEqual(got, want) {
		t.Errorf("c4's record = %q, want %q", got, want)
	}
}

// testBadVerdict: a verdict the ledger cannot record, or work without
// Decide, fails the batch and commits nothing of it.
func testBadVerdict(t *testing.T, db *ledger.DB) {
	h, _ := newWork(t, db, func(*spool.Message) error { return errors.New("down") })
	for name, v := range map[string]spool.Verdict{
		"retry without a time":       {Outcome: spool.OutcomeRetry},
		"dead letter without reason": {Outcome: spool.OutcomeDeadLetter},
		"processed":                  {Outcome: spool.OutcomeProcessed},
		"zero":                       {},
	} {
		w := spool.Work{Handler: h, Decide: func(spool.Failure) spool.Verdict { return v }}
		res, err := db.Consumer().Record(t.Context(), []*spool.Delivery{valid("ok", msg{ID: "ok"}), valid("c1", msg{ID: "m1"})}, w)
		if !errors.Is(err, ledger.ErrBadVerdict) || res != nil {
			t.Errorf("%s: %+v, %v, want ErrBadVerdict and no results", name, res, err)
		}
	}
	if res, err := db.Consumer().Record(t.Context(), []*spool.Delivery{valid("c1", msg{ID: "m1"})}, spool.Work{Handler: h}); err == nil || res != nil {
		t.Errorf("work without Decide: %+v, %v, want an error", res, err)
	}
	for _, table := range []string{"processed", "deliveries", "attempts", "work"} {
		if n := count(t, db, "SELECT COUNT(*) FROM "+table); n != 0 {
			t.Errorf("%s rows after refused batches = %d, want 0", table, n)
		}
	}
}
