package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spoolq/spool"
)

const (
	// MAX ignores the NULL bounds of an older spool's reservations.
	reservationOwners = `SELECT owner, MAX(call_bound_us) FROM reservations GROUP BY owner`
	ownerReservations = `DELETE FROM reservations WHERE owner = ?`
)

// Reserve records a batch's dead letters and duplicates and reserves the
// msg_ids of its other valid deliveries for owner; see spool.Ledger.
//
// The reservation is inserted before processed is read: on PostgreSQL, an
// insert that meets the reservation of a transaction settling the same
// msg_id waits for it, and the read that follows (a statement of its own,
// read committed) then sees that transaction's processed row. Read first,
// the processed row could be missed and the msg_id reserved and called a
// second time.
//
// Each row keeps owner's call bound (call_bound_us, migration 047), for
// the consumer that finds owner dead (ReservationOwners).
func (l Consumer) Reserve(ctx context.Context, batch []*spool.Delivery, owner spool.CallOwner) ([]spool.Result, error) {
	if err := l.db.open(); err != nil {
		return nil, err
	}
	for i, d := range batch {
		if err := l.db.checkDelivery(d); err != nil {
			return nil, fmt.Errorf("reserve: delivery %d: %w", i, err)
		}
	}
	if len(batch) == 0 {
		return nil, nil
	}
	res, err := l.db.reserve(ctx, l.db.screenKeys(batch), owner)
	if err != nil {
		return nil, l.db.fail("reserve", err)
	}
	out := make([]spool.Result, len(batch))
	for i, d := range batch {
		out[i] = res[i].public(d)
	}
	return out, nil
}

func (db *DB) reserve(ctx context.Context, batch []*spool.Delivery, owner spool.CallOwner) ([]result, error) {
	var res []result
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		res, err = db.reserveTx(ctx, tx, batch, owner)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// reserveTx is one try of reserve's transaction.
func (db *DB) reserveTx(ctx context.Context, tx *sql.Tx, batch []*spool.Delivery, owner spool.CallOwner) ([]result, error) {
	if err := db.fence(ctx, tx, batch); err != nil {
		return nil, err
	}
	now := time.Now()
	res := rejected(batch)
	first := map[string]int{} // msg_id -> the batch's first delivery of it
	var candidates []int
	for i, d := range batch {
		if d.Reject != nil {
			continue
		}
		if _, ok := first[d.Message.MsgID]; ok {
			continue // decided below, after its first delivery
		}
		first[d.Message.MsgID] = i
		candidates = append(candidates, i)
	}
	// In msg_id order, so that two consumers take the key locks in the same
	// order and cannot deadlock (PostgreSQL).
	slices.SortFunc(candidates, func(a, b int) int {
		return strings.Compare(batch[a].Message.MsgID, batch[b].Message.MsgID)
	})
	ids := make([]any, 0, len(candidates))
	args := make([]any, 0, len(candidates)*reservationColumns)
	var bound any // NULL: no bound known
	if owner.CallBound > 0 {
		bound = micros(owner.CallBound)
	}
	stamp := formatTime(now)
	for _, i := range candidates {
		d := batch[i]
		ids = append(ids, d.Message.MsgID)
		args = append(args, d.Message.MsgID, d.Claim, owner.Session, stamp, bound)
	}
	reserved, err := db.insReservations.ids(ctx, tx, args)
	if err != nil {
		return nil, fmt.Errorf("reserve: %w", err)
	}
	for _, i := range candidates {
		res[i].outcome = spool.OutcomeBusy
		if reserved[batch[i].Message.MsgID] {
			res[i].outcome = spool.OutcomeReserved
		}
	}
	done := map[string]bool{}
	if len(ids) > 0 {
		err = db.selOwners.query(ctx, tx, ids, func(rows *sql.Rows) error {
			var id, hash, claim string
			if err := rows.Scan(&id, &hash, &claim); err != nil {
				return err
			}
			done[id] = true
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read processed: %w", err)
		}
	}
	var undo []any
	for _, i := range candidates {
		d := batch[i]
		if !done[d.Message.MsgID] {
			continue
		}
		if res[i].outcome == spool.OutcomeReserved {
			undo = append(undo, d.Message.MsgID, d.Claim)
		}
		res[i].outcome = spool.OutcomeDuplicate
	}
	if err := db.delReservations.exec(ctx, tx, undo); err != nil {
		return nil, fmt.Errorf("unreserve: %w", err)
	}
	for i, d := range batch {
		if d.Message == nil || first[d.Message.MsgID] == i {
			continue
		}
		// A later delivery of a msg_id in the batch: a duplicate if the
		// msg_id is processed, else it waits for the first one's call.
		res[i].outcome = spool.OutcomeBusy
		if done[d.Message.MsgID] {
			res[i].outcome = spool.OutcomeDuplicate
		}
	}
	if err := db.markConflicts(ctx, tx, batch, res); err != nil {
		return nil, err
	}
	if err := db.insertDeliveryRows(ctx, tx, batch, res, now); err != nil {
		return nil, err
	}
	return res, nil
}

// Settle commits the outcomes of reserved deliveries' calls and removes
// their reservations; see spool.Ledger.
func (l Consumer) Settle(ctx context.Context, batch []*spool.Delivery, errs []error, decide func(spool.Failure) spool.Verdict) ([]spool.Result, error) {
	if err := l.db.open(); err != nil {
		return nil, err
	}
	if len(errs) != len(batch) {
		return nil, fmt.Errorf("settle: %d errors for %d deliveries", len(errs), len(batch))
	}
	if decide == nil {
		return nil, fmt.Errorf("settle: no Decide")
	}
	for i, d := range batch {
		if err := l.db.checkDelivery(d); err != nil {
			return nil, fmt.Errorf("settle: delivery %d: %w", i, err)
		}
		if d.Message == nil {
			return nil, fmt.Errorf("settle: delivery %d: %w: %s: not a valid message", i, ErrBadDelivery, d.File)
		}
		if err := l.db.checkKey(d); err != nil {
			return nil, fmt.Errorf("settle: delivery %d: %w", i, err)
		}
	}
	if len(batch) == 0 {
		return nil, nil
	}
	res, err := l.db.settle(ctx, batch, errs, decide)
	if err != nil {
		return nil, l.db.fail("settle", err)
	}
	out := make([]spool.Result, len(batch))
	for i, d := range batch {
		out[i] = res[i].public(d)
	}
	return out, nil
}

func (db *DB) settle(ctx context.Context, batch []*spool.Delivery, errs []error, decide func(spool.Failure) spool.Verdict) ([]result, error) {
	if done, err := db.settleOne(ctx, batch, errs); err != nil || done {
		if err != nil {
			return nil, err
		}
		return processedAll(len(batch)), nil
	}
	var res []result
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		var err error
		res, err = db.settleTx(ctx, tx, batch, errs, decide)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// settleTx is one try of settle's transaction.
func (db *DB) settleTx(ctx context.Context, tx *sql.Tx, batch []*spool.Delivery, errs []error, decide func(spool.Failure) spool.Verdict) ([]result, error) {
	if err := db.fence(ctx, tx, batch); err != nil {
		return nil, err
	}
	now := time.Now()
	res := make([]result, len(batch))
	order := make([]int, len(batch))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return strings.Compare(batch[a].Message.MsgID, batch[b].Message.MsgID)
	})
	// The successes in multi-row statements: a round trip per statement
	// costs more than the rows, and the settle is on every call's path.
	var args, claims []any
	stamp := formatTime(now)
	for _, i := range order {
		claims = append(claims, batch[i].Message.MsgID, batch[i].Claim)
		if errs[i] == nil {
			args = appendProcessed(args, batch[i], stamp)
		}
	}
	inserted, err := db.insProcessed.ids(ctx, tx, args)
	if err != nil {
		return nil, fmt.Errorf("insert processed: %w", err)
	}
	var cleared []any
	for _, i := range order {
		d := batch[i]
		switch {
		case errs[i] != nil:
			if err := db.recordFailure(ctx, tx, d, &res[i], errs[i], decide); err != nil {
				return nil, err
			}
		case inserted[d.Message.MsgID]:
			res[i].outcome = spool.OutcomeProcessed
			cleared = append(cleared, d.Message.MsgID)
		default:
			// Only if the reservation was lost (its owner taken for dead)
			// and another delivery processed the msg_id meanwhile.
			res[i].outcome = spool.OutcomeDuplicate
		}
	}
	if err := db.delAttempts.exec(ctx, tx, cleared); err != nil {
		return nil, fmt.Errorf("clear attempts: %w", err)
	}
	if err := db.delReservations.exec(ctx, tx, claims); err != nil {
		return nil, fmt.Errorf("unreserve: %w", err)
	}
	if err := db.markConflicts(ctx, tx, batch, res); err != nil {
		return nil, err
	}
	if err := db.insertDeliveryRows(ctx, tx, batch, res, now); err != nil {
		return nil, err
	}
	return res, nil
}

// ReservationOwners lists the sessions holding reservations, each with
// the longest call bound its reservations were made with; see
// spool.Ledger.
func (l Consumer) ReservationOwners(ctx context.Context) ([]spool.CallOwner, error) {
	if err := l.db.open(); err != nil {
		return nil, err
	}
	rows, err := l.db.sql.QueryContext(ctx, reservationOwners)
	if err != nil {
		return nil, l.db.fail("reservation owners", err)
	}
	defer rows.Close()
	var out []spool.CallOwner
	for rows.Next() {
		var o spool.CallOwner
		var bound sql.NullInt64
		if err := rows.Scan(&o.Session, &bound); err != nil {
			return nil, l.db.fail("reservation owners", err)
		}
		o.CallBound = time.Duration(bound.Int64) * time.Microsecond
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, l.db.fail("reservation owners", err)
	}
	return out, nil
}

// ReleaseReservations removes every reservation owner holds, and returns
// how many there were; see spool.Ledger.
func (l Consumer) ReleaseReservations(ctx context.Context, owner string) (int, error) {
	if err := l.db.open(); err != nil {
		return 0, err
	}
	r, err := l.db.sql.ExecContext(ctx, l.db.dialect.Rebind(ownerReservations), owner)
	if err != nil {
		return 0, l.db.fail("release reservations of "+owner, err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return 0, l.db.fail("release reservations of "+owner, err)
	}
	return int(n), nil
}

// ReleaseClaims removes the reservations owner holds for claims; see
// spool.Ledger.
func (l Consumer) ReleaseClaims(ctx context.Context, owner string, claims []string) (int, error) {
	if err := l.db.open(); err != nil {
		return 0, err
	}
	total := 0
	for chunk := range slices.Chunk(claims, rowsPerInsert) {
		args := make([]any, 0, len(chunk)+1)
		args = append(args, owner)
		for _, c := range chunk {
			args = append(args, c)
		}
		r, err := l.db.sql.ExecContext(ctx, l.db.dialect.Rebind(
			"DELETE FROM reservations WHERE owner = ? AND claim IN ("+placeholders(len(chunk))+")"), args...)
		if err != nil {
			return total, l.db.fail("release reservations of "+owner, err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return total, l.db.fail("release reservations of "+owner, err)
		}
		total += int(n)
	}
	return total, nil
}
