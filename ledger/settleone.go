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

// fenceWith is the head of a one-statement write: the CTE fence, whose one
// row's held is true when its two parameters, the session, are NULL (no
// lease to check) or name a session whose lease row is there and not
// taken, read with a share lock (share) as fence does in a transaction.
func fenceWith(share string) string {
	return `WITH fence AS (
    SELECT CAST(? AS text) IS NULL OR EXISTS (
        SELECT 1 FROM session_leases WHERE session = CAST(? AS text) AND taken = 0 ` + share + `) AS held
)`
}

// settleOneText is the statement of settleOne, for a dialect with
// writable WITH clauses, whose column arrays are rows: the fence, the
// processed rows, the attempts they clear and the reservations they end,
// in one statement. Its parameters are the session twice (NULL: no lease
// to check), the processed rows' column arrays, and the array of their
// msg_ids and that of their claims.
//
// The fence reads the session's lease row with a share lock, as fence
// does in a transaction, and the INSERT depends on it: with the lease
// gone or taken the statement writes nothing and returns false. The
// INSERT has no ON CONFLICT: a msg_id that processed holds already fails
// the whole statement (KeyTaken), and the settle is made again in a
// transaction of its own, which records that delivery as a duplicate. So
// when the statement succeeds every msg_id went in, and the DELETEs take
// the lists as given.
//
// The writes run in settleTx's order, the INSERT (in msg_id order), then
// the attempts, then the reservations, so that the two paths lock rows in
// one order and cannot deadlock each other: each DELETE reads the count
// of what the write before it returned, which makes that write run to its
// end first. Left to itself, the server runs the data-modifying parts of
// a WITH that the query does not read at its end, last one first.
//
// The DELETEs find their rows by = ANY of an array on the primary key,
// which the plan the server caches for the statement (planned while the
// tables were small, and reservations, emptied all the time, stays small)
// keeps as an index scan; a join against the unnested arrays was planned
// as a sequential scan of both tables, dead rows and all.
func settleOneText(d Dialect, rows func([]Kind) string, share string) string {
	return d.Rebind(fenceWith(share) + `, ins AS (
    ` + insProcessed + `
    SELECT r.* FROM (` + rows(processedKinds) + `) AS r, fence WHERE fence.held
    RETURNING msg_id
), inserted AS (
    SELECT count(*) AS n FROM ins
), cleared AS (
    DELETE FROM attempts WHERE msg_id = ANY (CAST(? AS text[])) AND (SELECT n FROM inserted) > 0
    RETURNING msg_id
), unreserved AS (
    DELETE FROM reservations
    WHERE msg_id = ANY (CAST(? AS text[])) AND claim = ANY (CAST(? AS text[]))
      AND (SELECT n FROM inserted) > 0 AND (SELECT count(*) FROM cleared) IS NOT NULL
)
SELECT held FROM fence`)
}

// prepareOne prepares the statements of settleOne and recordOne where the
// dialect has writable WITH clauses and the engine keeps leases; elsewhere
// they stay nil, and the transactions do all the writing.
func (db *DB) prepareOne(ctx context.Context) error {
	w, ok := db.dialect.(WritableWith)
	if !ok || !db.lease.ok || db.writeTurn != nil || db.turn != nil {
		return nil
	}
	var err error
	db.settleOneStmt, err = db.sql.PrepareContext(ctx, settleOneText(db.dialect, w.Rows, db.lease.sql.Share))
	if err != nil {
		return fmt.Errorf("prepare settle in one statement: %w", err)
	}
	db.recordOneStmt, err = db.sql.PrepareContext(ctx, recordOneText(db.dialect, w.Rows, db.lease.sql.Share))
	if err != nil {
		return fmt.Errorf("prepare record in one statement: %w", err)
	}
	return nil
}

// oneSession is the session whose lease a one-statement write of batch
// checks: NULL when this DB holds the lease of none of its deliveries'
// sessions, and false when it holds those of more than one, which the
// statement cannot check.
func (db *DB) oneSession(batch []*spool.Delivery) (any, bool) {
	switch sessions := db.fenced(batch); len(sessions) {
	case 0:
		return nil, true
	case 1:
		return sessions[0], true
	default:
		return nil, false
	}
}

// settleOne settles a group of calls that all succeeded in one statement
// outside any transaction (WritableWith): its processed rows inserted,
// their attempts cleared, their reservations removed, all or nothing, as
// settleTx does in BEGIN, the fence, three statements and COMMIT. It
// reports false, having committed nothing, where it does not apply: no
// such statement, a failed call in the group, deliveries of more than one
// fenced session, or a msg_id already in processed (a reservation lost to
// a recovery while its call ran), which the transaction of settleTx then
// records as a duplicate.
func (db *DB) settleOne(ctx context.Context, batch []*spool.Delivery, errs []error) (bool, error) {
	if db.settleOneStmt == nil || slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		return false, nil
	}
	session, ok := db.oneSession(batch)
	if !ok {
		return false, nil
	}
	// In msg_id order, as settleTx inserts them: two writers of one
	// msg_id take its key lock in one order and cannot deadlock (and the
	// statement's writes come in settleTx's order, settleOneText).
	order := make([]*spool.Delivery, len(batch))
	copy(order, batch)
	slices.SortFunc(order, func(a, b *spool.Delivery) int { return strings.Compare(a.Message.MsgID, b.Message.MsgID) })
	now := time.Now()
	rows := make([]any, 0, len(order)*processedColumns)
	ids, claims := make([]any, len(order)), make([]any, len(order))
	stamp := formatTime(now)
	for i, d := range order {
		rows = appendProcessed(rows, d, stamp)
		ids[i], claims[i] = d.Message.MsgID, d.Claim
	}
	args := append([]any{session, session}, columns(rows, processedColumns)...)
	args = append(args, ids, ids, claims)
	var held bool
	err := db.settleOneStmt.QueryRowContext(ctx, args...).Scan(&held)
	switch {
	case err != nil && db.dialect.(WritableWith).KeyTaken(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("settle in one statement: %w", err)
	case !held:
		return false, fmt.Errorf("session %s: %w", session, spool.ErrLeaseLost)
	}
	return true, nil
}

// processedAll is the results of a group that settleOne committed: each
// delivery processed.
func processedAll(n int) []result {
	res := make([]result, n)
	for i := range res {
		res[i].outcome = spool.OutcomeProcessed
	}
	return res
}

// closeOne closes the statements of prepareOne, if prepared.
func (db *DB) closeOne() error {
	var errs []error
	for _, st := range []*sql.Stmt{db.settleOneStmt, db.recordOneStmt} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}
