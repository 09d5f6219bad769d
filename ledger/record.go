package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spoolq/spool"
)

// result is what became of one delivery of a batch, with what its
// deliveries row needs; it is returned as a spool.Result only after the
// commit.
type result struct {
	outcome  spool.Outcome
	attempts int
	err      error
	retryAt  time.Time
	// For the deliveries row.
	reason, field, detail string
	firstFailure          time.Time
	lastFailure           time.Time
	conflict              bool
}

// public is the result as Record returns it for d.
func (r result) public(d *spool.Delivery) spool.Result {
	out := spool.Result{Outcome: r.outcome, Attempts: r.attempts, Err: r.err, RetryAt: r.retryAt, Conflict: r.conflict}
	if r.outcome == spool.OutcomeDeadLetter {
		out.Reject = d.Reject
		if out.Reject == nil {
			// A valid message the handler dead-lettered: say why, as for
			// any other dead letter.
			out.Reject = &spool.RejectError{Reason: spool.Reason(r.reason), Field: r.field, Detail: r.detail}
		}
	}
	return out
}

// maxDetail bounds a failure detail kept in the ledger: a handler's error
// may carry a whole response body or a stack.
const maxDetail = 2000

func (db *DB) record(ctx context.Context, batch []*spool.Delivery, w spool.Work) ([]result, error) {
	return db.recordWith(ctx, batch, w, nil)
}

// recordWith is record with also, when not nil, run last in the batch's
// transaction: a batch file's progress (RecordBatch). A batch file's
// records without business work, on a single-writer engine, are looked up
// and then inserted (insertProcessedLocked); a plain batch of messages
// keeps insertProcessedRows, whose figures its path was measured with.
func (db *DB) recordWith(ctx context.Context, batch []*spool.Delivery, w spool.Work, also func(tx *sql.Tx, res []result) error) ([]result, error) {
	if w.Handler == nil && also == nil {
		if res, done, err := db.recordOne(ctx, batch); err != nil || done {
			return res, err
		}
	}
	locked := w.Handler == nil && also != nil && db.insProcessedLocked != nil
	var res []result
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		if err := db.fence(ctx, tx, batch); err != nil {
			return err
		}
		now := time.Now()
		res = rejected(batch)
		var err error
		switch {
		case locked:
			// Its lookup decides the conflicts too.
			err = db.insertProcessedLocked(ctx, tx, batch, res, now)
		case w.Handler == nil:
			err = db.insertProcessedRows(ctx, tx, batch, res, now)
		default:
			err = db.runWork(ctx, tx, batch, res, w, now)
		}
		if err != nil {
			return err
		}
		if !locked {
			if err := db.markConflicts(ctx, tx, batch, res); err != nil {
				return err
			}
		}
		if err := db.insertDeliveryRows(ctx, tx, batch, res, now); err != nil {
			return err
		}
		if also != nil {
			return also(tx, res)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// rejected returns the results of a batch before its transaction: its
// dead letters decided, the others to be decided.
func rejected(batch []*spool.Delivery) []result {
	res := make([]result, len(batch))
	for i, d := range batch {
		if d.Reject != nil {
			res[i] = result{outcome: spool.OutcomeDeadLetter, reason: string(d.Reject.Reason),
				field: d.Reject.Field, detail: d.Reject.Detail}
		}
	}
	return res
}

// processedArgs is the processed row of d, processed at now.
func processedArgs(d *spool.Delivery, now time.Time) []any {
	return appendProcessed(make([]any, 0, processedColumns), d, formatTime(now))
}

// appendProcessed appends the processed row of d, processed at the time
// at (formatTime), to args: a batch's rows share one time, formatted once
// (each formatting was 2.7% of a batch file's record in
// BenchmarkRecordBatchFile), and one slice.
func appendProcessed(args []any, d *spool.Delivery, at string) []any {
	m := d.Message
	return append(args, m.MsgID, nullString(m.OrderNo), nullInt(m.Seq), nullString(string(m.Amount)),
		at, clean(d.File), contentHash(d), string(m.Raw), d.Claim, nullIno(d.Ino),
		nullString(m.Headers.Version), nullString(m.Headers.Trace), nullString(m.Headers.Tenant))
}

// insertProcessedRows is the path without business work: the valid
// deliveries' rows go into processed in multi-row statements.
func (db *DB) insertProcessedRows(ctx context.Context, tx *sql.Tx, batch []*spool.Delivery, res []result, now time.Time) error {
	candidates, _ := firstOfEach(batch, res)
	// Multi-row statements: a statement's round trip through database/sql
	// and the driver costs more than SQLite's per-row work. RETURNING names
	// the rows the PRIMARY KEY let in; the rest were already there:
	// duplicates (I2, decided by the constraint).
	args := make([]any, 0, len(candidates)*processedColumns)
	stamp := formatTime(now)
	for _, i := range candidates {
		args = appendProcessed(args, batch[i], stamp)
	}
	inserted, err := db.insProcessed.ids(ctx, tx, args)
	if err != nil {
		return fmt.Errorf("insert processed: %w", err)
	}
	for _, i := range candidates {
		if inserted[batch[i].Message.MsgID] {
			res[i].outcome = spool.OutcomeProcessed
		} else {
			res[i].outcome = spool.OutcomeDuplicate
		}
	}
	return nil
}

// firstOfEach returns the index in batch of the first delivery of each
// msg_id, in msg_id order, and by msg_id: the candidates for processed.
// The later deliveries of a msg_id in the batch are duplicates whatever
// becomes of the first (I2: the earlier delivery wins), and it marks them
// so in res. The order is the one the rows are inserted in, so that two
// consumers whose batches share msg_ids take the key locks in the same
// order and cannot deadlock (PostgreSQL).
func firstOfEach(batch []*spool.Delivery, res []result) ([]int, map[string]int) {
	first := make(map[string]int, len(batch))
	var candidates []int
	for i, d := range batch {
		if d.Message == nil {
			continue
		}
		if _, ok := first[d.Message.MsgID]; ok {
			res[i].outcome = spool.OutcomeDuplicate
			continue
		}
		first[d.Message.MsgID] = i
		candidates = append(candidates, i)
	}
	slices.SortFunc(candidates, func(a, b int) int {
		return strings.Compare(batch[a].Message.MsgID, batch[b].Message.MsgID)
	})
	return candidates, first
}

// ErrBadVerdict is wrapped by Record when Work.Decide returned a
// verdict it cannot record: neither a dead letter with a reason nor a retry
// with a time. Nothing of the batch is committed.
var ErrBadVerdict = errors.New("bad verdict")

// runWork is the path with business work: each valid delivery in its own
// savepoint, so that a failing handler takes back its own writes and its
// processed row and nothing else of the batch.
func (db *DB) runWork(ctx context.Context, tx *sql.Tx, batch []*spool.Delivery, res []result, w spool.Work, now time.Time) error {
	order := make([]int, 0, len(batch))
	for i, d := range batch {
		if d.Message != nil {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return strings.Compare(batch[a].Message.MsgID, batch[b].Message.MsgID)
	})
	for _, i := range order {
		if err := db.work1(ctx, tx, batch[i], &res[i], w, now); err != nil {
			return err
		}
	}
	return nil
}

// work1 inserts one delivery's processed row and runs the handler on it,
// in a savepoint: a duplicate never reaches the handler, and a failure
// takes back the handler's writes and the row before it is recorded.
func (db *DB) work1(ctx context.Context, tx *sql.Tx, d *spool.Delivery, r *result, w spool.Work, now time.Time) error {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT spool_message"); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	inserted, err := db.insertProcessed1(ctx, tx, d, now)
	if err != nil {
		return err
	}
	if !inserted {
		r.outcome = spool.OutcomeDuplicate
		return release(ctx, tx)
	}
	// The handler's events go into the outbox in its transaction
	// (spool.Emit), through the delivery it is given, which holds the
	// Emitter for the length of the call only.
	outbox := d.Outbox
	d.Outbox = db.emit
	herr := spool.Call(ctx, w.Handler, tx, d)
	d.Outbox = outbox
	if herr == nil {
		// Released first, with the session's settings put back, so that
		// the ledger's own statements from here on, and the commit, run
		// as the session was checked (SessionReset).
		if err := db.releaseHandled(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, db.q.deleteAttempts, d.Message.MsgID); err != nil {
			return fmt.Errorf("clear attempts %q: %w", d.Message.MsgID, err)
		}
		r.outcome = spool.OutcomeProcessed
		return nil
	}
	// The handler failed: undo its writes and the processed row, then
	// record the failure in the batch's transaction.
	if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT spool_message"); err != nil {
		// Both wrapped: an engine that gave up the whole transaction
		// under the handler (Dialect.Retry) has no savepoint left either.
		return fmt.Errorf("rollback to savepoint after %w: %w", herr, err)
	}
	if err := release(ctx, tx); err != nil {
		return err
	}
	return db.recordFailure(ctx, tx, d, r, herr, w.Decide)
}

// insertProcessed1 inserts one delivery's processed row and reports
// whether it went in: false for a duplicate, whose msg_id the PRIMARY KEY
// already holds (I2).
func (db *DB) insertProcessed1(ctx context.Context, tx *sql.Tx, d *spool.Delivery, now time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, db.q.insertProcessed, processedArgs(d, now)...)
	if err != nil {
		return false, fmt.Errorf("insert processed %q: %w", d.Message.MsgID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("insert processed %q: %w", d.Message.MsgID, err)
	}
	return n > 0, nil
}

// releaseHandled releases the savepoint of a message whose handler
// succeeded and, on an engine with a SessionReset, puts back in the same
// round trip the session settings the handler could have changed: after
// every handler rather than once a batch, since the ledger's statements
// for the next messages (their processed rows, this one's attempts) must
// find its own tables too; and at no cost of its own, the statements
// going with the release. (A failed handler's changes went with its
// savepoint.)
func (db *DB) releaseHandled(ctx context.Context, tx *sql.Tx) error {
	r, ok := db.dialect.(SessionReset)
	if !ok {
		return release(ctx, tx)
	}
	if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT spool_message; "+r.ResetSession()); err != nil {
		return fmt.Errorf("release savepoint and reset the session's settings: %w", err)
	}
	return nil
}

func release(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT spool_message"); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// recordFailure counts a handler's failed attempt, has decide give its
// verdict, and records that: a retry scheduled in attempts, or a dead
// letter with the attempt history (its attempts row cleared).
func (db *DB) recordFailure(ctx context.Context, tx *sql.Tx, d *spool.Delivery, r *result, herr error, decide func(spool.Failure) spool.Verdict) error {
	// The failure's own time, not the batch's start: the backoff counts
	// from when this message failed, however long the handlers before it
	// in the batch took.
	now := time.Now()
	id := d.Message.MsgID
	attempts, first, found, err := db.attempts(ctx, tx, id)
	if err != nil {
		return err
	}
	if !found {
		first = now
	}
	attempts++
	v := decide(spool.Failure{Err: herr, Attempts: attempts, At: now})
	r.attempts, r.err, r.firstFailure, r.lastFailure = attempts, herr, first, now
	detail := herr.Error()
	if len(detail) > maxDetail {
		detail = detail[:maxDetail] + "..."
	}
	switch {
	case v.Outcome == spool.OutcomeDeadLetter && v.Reason != "":
		r.outcome, r.reason, r.detail = spool.OutcomeDeadLetter, string(v.Reason), detail
		if _, err := tx.ExecContext(ctx, db.q.deleteAttempts, id); err != nil {
			return fmt.Errorf("clear attempts %q: %w", id, err)
		}
		return nil
	case v.Outcome == spool.OutcomeRetry && !v.RetryAt.IsZero():
		r.outcome, r.retryAt = spool.OutcomeRetry, v.RetryAt
		if _, err := tx.ExecContext(ctx, db.q.upsertAttempts, id, attempts, formatTime(first), formatTime(now),
			formatTime(r.retryAt), clean(detail), clean(d.File)); err != nil {
			return fmt.Errorf("record attempt %q: %w", id, err)
		}
		return nil
	}
	return fmt.Errorf("%w: %s: %+v", ErrBadVerdict, d.File, v)
}

// attempts returns the failed attempts recorded for msgID and when the
// first of them failed, and false when none are recorded.
func (db *DB) attempts(ctx context.Context, tx *sql.Tx, msgID string) (int, time.Time, bool, error) {
	var n int
	var first string
	err := tx.QueryRowContext(ctx, db.q.selectAttempts, msgID).Scan(&n, &first)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, time.Time{}, false, nil
	case err != nil:
		return 0, time.Time{}, false, fmt.Errorf("read attempts %q: %w", msgID, err)
	}
	t, err := parseTime("first_failure", first)
	if err != nil {
		return 0, time.Time{}, false, err
	}
	return n, t, true, nil
}

// markConflicts flags the duplicates whose content differs from the
// processed row's: the same msg_id with another body means a producer bug
// or tampering, not an ordinary redelivery. It also refuses a duplicate
// whose claim is the processed row's own: that claim was recorded already,
// and recording it again would make a message a duplicate of itself (I7).
// The deliveries' UNIQUE claim catches the other outcomes recorded twice.
func (db *DB) markConflicts(ctx context.Context, tx *sql.Tx, batch []*spool.Delivery, res []result) error {
	var ids []any
	seen := map[string]bool{}
	for i, d := range batch {
		if res[i].outcome == spool.OutcomeDuplicate && !seen[d.Message.MsgID] {
			seen[d.Message.MsgID] = true
			ids = append(ids, d.Message.MsgID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	owners, err := db.owners(ctx, tx, ids)
	if err != nil {
		return fmt.Errorf("compare duplicates: %w", err)
	}
	return compareOwners(batch, res, owners)
}

// owner is what a duplicate is compared with: its msg_id's processed
// row's content hash and claim.
type owner struct{ hash, claim string }

// owners returns the processed rows of the msg_ids ids has, by msg_id.
func (db *DB) owners(ctx context.Context, tx *sql.Tx, ids []any) (map[string]owner, error) {
	owners := make(map[string]owner, len(ids))
	err := db.selOwners.query(ctx, tx, ids, func(rows *sql.Rows) error {
		var id string
		var o owner
		if err := rows.Scan(&id, &o.hash, &o.claim); err != nil {
			return err
		}
		owners[id] = o
		return nil
	})
	return owners, err
}

// compareOwners flags the duplicates of res whose content differs from
// their owner's, and refuses one whose claim is its owner's (markConflicts).
func compareOwners(batch []*spool.Delivery, res []result, owners map[string]owner) error {
	for i, d := range batch {
		if res[i].outcome != spool.OutcomeDuplicate {
			continue
		}
		o, ok := owners[d.Message.MsgID]
		if !ok {
			continue
		}
		if o.claim == d.Claim {
			return fmt.Errorf("%w: %s: claim %s already recorded as processed", ErrBadDelivery, d.File, d.Claim)
		}
		if o.hash != contentHash(d) {
			res[i].conflict = true
		}
	}
	return nil
}

// insertDeliveryRows records the duplicates and dead letters. A processed
// delivery is recorded by its processed row alone (migration 003), and a
// delivery waiting for a retry has no outcome yet, so its claim stays
// unknown to recovery and the message goes back to inbox/ if its consumer
// dies.
func (db *DB) insertDeliveryRows(ctx context.Context, tx *sql.Tx, batch []*spool.Delivery, res []result, now time.Time) error {
	var args []any
	for i, d := range batch {
		r := res[i]
		if r.outcome != spool.OutcomeDuplicate && r.outcome != spool.OutcomeDeadLetter {
			continue
		}
		args = append(args, deliveryArgs(d, r, now)...)
	}
	if err := db.insDeliveries.exec(ctx, tx, args); err != nil {
		return fmt.Errorf("insert deliveries: %w", err)
	}
	return nil
}

// deliveryArgs is the deliveries row of d, a duplicate or a dead letter
// whose result is r, in the columns' order (deliveryColumns, conflict
// last).
func deliveryArgs(d *spool.Delivery, r result, now time.Time) []any {
	var msgID, attempts, firstFailure, lastFailure any
	switch {
	case d.Message != nil:
		msgID = d.Message.MsgID
	case d.Reject != nil && d.Reject.MsgID != "":
		msgID = d.Reject.MsgID // a dead letter's key, when it had a valid one
	}
	if r.attempts > 0 {
		attempts, firstFailure, lastFailure = r.attempts, formatTime(r.firstFailure), formatTime(r.lastFailure)
	}
	var reason any
	if r.reason != "" {
		reason = clean(r.reason)
	}
	conflict := 0
	if r.conflict {
		conflict = 1
	}
	return []any{d.Claim, clean(d.File), nullIno(d.Ino), clean(d.Consumer), msgID,
		string(r.outcome), reason, nullString(cut(clean(r.field), maxDetail)), nullString(cut(clean(r.detail), maxDetail)),
		nullString(d.Hash), d.Size, formatTime(at(d, now)), attempts, firstFailure, lastFailure, conflict}
}

// at is when d was delivered, or now when it does not say.
func at(d *spool.Delivery, now time.Time) time.Time {
	if d.At.IsZero() {
		return now
	}
	return d.At
}

// contentHash is the hash of d's content that processed keeps and that a
// duplicate is compared by: the one it came with, or its message's.
func contentHash(d *spool.Delivery) string {
	if d.Hash != "" {
		return d.Hash
	}
	return spool.ContentHash(d.Message.Raw)
}
