package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/spoolq/spool"
)

// recordOneText is the statement of recordOne, for a dialect with writable
// WITH clauses: a batch of a plain drain recorded in one statement, the
// fence, the processed rows and the deliveries rows of its duplicates and
// dead letters, where a transaction takes six round trips (BEGIN, the
// fence, the INSERT, the owners' lookup, the deliveries' INSERT, COMMIT).
//
// Its parameters, in order: the session twice (NULL: no lease to check);
// the candidates' msg_ids (the first delivery of each msg_id in the batch,
// in msg_id order); the known rows' column arrays (knownKinds: the batch's
// dead letters and its later deliveries of a candidate's msg_id, each with
// its owner's hash if the candidate's row goes in, and its own); the
// candidates' msg_ids again and their deliveries columns (the CTE cand),
// read by position for those that turn out to be duplicates; the
// candidates' processed rows (processedKinds).
//
// What decides: old is what processed holds of the candidates' msg_ids as
// the statement starts. A candidate in it is a duplicate of that row, the
// others go in, and the INSERT has no ON CONFLICT: a row another writer
// committed since the statement began (or commits while it waits on that
// key) fails the whole statement (KeyTaken), and the batch is recorded
// again by the transaction of record, whose owners' lookup then sees it.
// So when the statement succeeds, each outcome was decided against the
// rows it compared with, and a duplicate's conflict flag is its hash
// against its owner's: the old row's, or the candidate's that went in. A
// duplicate whose claim is its owner's (a claim recorded twice, I7) makes
// bad true, and then nothing is written: record's transaction reports it.
//
// The writes run in the transaction's order, processed (in msg_id order)
// then deliveries, since the deliveries' INSERT reads the count of the
// processed rows; with the lease gone or taken (fence), nothing is written.
// The rows of processed are filtered against old by <> ALL of an array,
// not by NOT EXISTS: the anti join a planner may make of that could hash
// the rows and insert them in another order than msg_id's, and two
// writers of one msg_id must take its key lock in one order.
func recordOneText(d Dialect, rows func([]Kind) string, share string) string {
	return d.Rebind(fenceWith(share) + `, old AS (
    SELECT msg_id, content_hash, claim FROM processed WHERE msg_id = ANY (CAST(? AS text[]))
), known AS (
    SELECT * FROM (` + rows(knownKinds) + `) AS k (claim, file, ino, consumer, msg_id, outcome, reason,
        field, detail, content_hash, size, at, attempts, first_failure, last_failure, owner_hash, cmp_hash)
), cand AS (
    SELECT CAST(? AS text[]) AS ids, CAST(? AS text[]) AS claim, CAST(? AS text[]) AS file,
        CAST(? AS bigint[]) AS ino, CAST(? AS text[]) AS consumer, CAST(? AS text[]) AS content_hash,
        CAST(? AS bigint[]) AS size, CAST(? AS text[]) AS at, CAST(? AS text[]) AS cmp_hash
), dup AS (
    SELECT o.msg_id, o.content_hash AS owner_hash, o.claim AS owner_claim, array_position(a.ids, o.msg_id) AS i
    FROM old o, cand a
), bad AS (
    SELECT EXISTS (SELECT 1 FROM dup c, cand a WHERE c.owner_claim = a.claim[c.i])
        OR EXISTS (SELECT 1 FROM known k JOIN old o ON o.msg_id = k.msg_id AND o.claim = k.claim
                   WHERE k.cmp_hash IS NOT NULL) AS v
), ins AS (
    ` + insProcessed + `
    SELECT r.* FROM (` + rows(processedKinds) + `) AS r (msg_id, order_no, seq, amount, processed_at, file,
        content_hash, payload, claim, ino, schema_version, traceparent, tenant), fence, bad
    WHERE fence.held AND NOT bad.v AND r.msg_id <> ALL (ARRAY(SELECT msg_id FROM old))
    RETURNING msg_id
), dl AS (
    INSERT INTO deliveries (claim, file, ino, consumer, msg_id, outcome, reason, field, detail, content_hash,
        size, at, attempts, first_failure, last_failure, conflict)
    SELECT u.* FROM (
        SELECT k.claim, k.file, k.ino, k.consumer, k.msg_id, k.outcome, k.reason, k.field, k.detail,
            k.content_hash, k.size, k.at, k.attempts, k.first_failure, k.last_failure,
            CASE WHEN k.cmp_hash IS NOT NULL AND COALESCE(o.content_hash, k.owner_hash) <> k.cmp_hash
                THEN 1 ELSE 0 END
        FROM known k LEFT JOIN old o ON o.msg_id = k.msg_id AND k.cmp_hash IS NOT NULL
        UNION ALL
        SELECT a.claim[c.i], a.file[c.i], a.ino[c.i], a.consumer[c.i], c.msg_id, 'duplicate', NULL, NULL, NULL,
            a.content_hash[c.i], a.size[c.i], a.at[c.i], NULL, NULL, NULL,
            CASE WHEN c.owner_hash <> a.cmp_hash[c.i] THEN 1 ELSE 0 END
        FROM dup c, cand a
    ) AS u, fence, bad
    WHERE fence.held AND NOT bad.v AND (SELECT count(*) FROM ins) IS NOT NULL
    RETURNING claim, conflict
)
SELECT f.held, b.v, d.claim, d.conflict FROM fence f CROSS JOIN bad b LEFT JOIN dl d ON true`)
}

// knownKinds are the kinds of recordOne's known rows: the deliveries
// columns but conflict, then the owner's hash and the row's own.
var knownKinds = []Kind{Text, Text, Int, Text, Text, Text, Text, Text, Text, Text, Int, Text, Int, Text, Text, Text, Text}

// recordOne records a batch without business work in one statement
// outside any transaction (recordOneText), all or nothing, with the
// results record's transaction would give. It reports false, having
// written nothing, where it does not apply: no such statement, deliveries
// of more than one fenced session, a msg_id that another writer inserted
// while the statement ran (KeyTaken), a transaction the engine gave up
// (Dialect.Retry), or a claim recorded already: record's transaction then
// records the batch, or reports why it cannot.
func (db *DB) recordOne(ctx context.Context, batch []*spool.Delivery) ([]result, bool, error) {
	if db.recordOneStmt == nil {
		return nil, false, nil
	}
	session, ok := db.oneSession(batch)
	if !ok {
		return nil, false, nil
	}
	claims := make(map[string]bool, len(batch))
	for _, d := range batch {
		if claims[d.Claim] {
			return nil, false, nil // the rows are told apart by claim
		}
		claims[d.Claim] = true
	}
	now := time.Now()
	res := rejected(batch)
	candidates, first := firstOfEach(batch, res)
	args := append([]any{session, session}, recordOneArgs(batch, res, candidates, first, now)...)
	conflicts, held, bad, err := db.runRecordOne(ctx, args)
	switch {
	case err != nil && (db.dialect.(WritableWith).KeyTaken(err) || db.dialect.Retry(err)):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("record in one statement: %w", err)
	case !held:
		return nil, false, fmt.Errorf("session %s: %w", session, spool.ErrLeaseLost)
	case bad:
		return nil, false, nil
	}
	if err := readRecordOne(batch, res, conflicts); err != nil {
		return nil, false, err
	}
	return res, true, nil
}

// recordOneArgs are the parameters of recordOneText after the session: the
// candidates' msg_ids, the known rows (the duplicates res marks already,
// and the dead letters), the candidates' deliveries columns and their
// processed rows.
func recordOneArgs(batch []*spool.Delivery, res []result, candidates []int, first map[string]int, now time.Time) []any {
	var known []any
	for i, d := range batch {
		var owner, own any
		switch res[i].outcome {
		case spool.OutcomeDuplicate:
			owner, own = contentHash(batch[first[d.Message.MsgID]]), contentHash(d)
		case spool.OutcomeDeadLetter:
		default:
			continue
		}
		row := deliveryArgs(d, res[i], now)
		known = append(append(known, row[:deliveryColumns-1]...), owner, own)
	}
	n := len(candidates)
	ids := make([]any, n)
	cand := make([][]any, 8) // cand's columns after ids, in order
	for k := range cand {
		cand[k] = make([]any, n)
	}
	rows := make([]any, 0, n*processedColumns)
	stamp := formatTime(now)
	for j, i := range candidates {
		d := batch[i]
		ids[j] = d.Message.MsgID
		for k, v := range []any{d.Claim, clean(d.File), nullIno(d.Ino), clean(d.Consumer), nullString(d.Hash),
			d.Size, formatTime(at(d, now)), contentHash(d)} {
			cand[k][j] = v
		}
		rows = appendProcessed(rows, d, stamp)
	}
	args := append([]any{ids}, columns(known, len(knownKinds))...)
	args = append(args, ids)
	for _, c := range cand {
		args = append(args, c)
	}
	return append(args, columns(rows, processedColumns)...)
}

// readRecordOne completes res from the deliveries rows recordOne's
// statement wrote (claim: conflict): a candidate with a row is a
// duplicate, one without was processed, and every duplicate and dead
// letter must have its row.
func readRecordOne(batch []*spool.Delivery, res []result, conflicts map[string]bool) error {
	written := 0
	for i, d := range batch {
		if res[i].outcome == "" { // a candidate
			if _, dup := conflicts[d.Claim]; !dup {
				res[i].outcome = spool.OutcomeProcessed
				continue
			}
			res[i].outcome = spool.OutcomeDuplicate
		}
		c, ok := conflicts[d.Claim]
		if !ok {
			return fmt.Errorf("record in one statement: no deliveries row for %s", d.File)
		}
		res[i].conflict = c
		written++
	}
	if written != len(conflicts) {
		return fmt.Errorf("record in one statement: %d deliveries rows for %d duplicates and dead letters", len(conflicts), written)
	}
	return nil
}

// runRecordOne runs recordOne's statement with args and returns the
// deliveries rows it wrote (claim: conflict), whether the lease was held
// and whether a claim was recorded already.
func (db *DB) runRecordOne(ctx context.Context, args []any) (map[string]bool, bool, bool, error) {
	rs, err := db.recordOneStmt.QueryContext(ctx, args...)
	if err != nil {
		return nil, false, false, err
	}
	defer rs.Close()
	conflicts := map[string]bool{}
	var held, bad bool
	for rs.Next() {
		var claim sql.NullString
		var conflict sql.NullInt64
		if err := rs.Scan(&held, &bad, &claim, &conflict); err != nil {
			return nil, false, false, err
		}
		if claim.Valid {
			conflicts[claim.String] = conflict.Int64 != 0
		}
	}
	if err := rs.Err(); err != nil {
		return nil, false, false, err
	}
	return conflicts, held, bad, rs.Close()
}
