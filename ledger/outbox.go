package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spoolq/spool"
)

// The outbox (migration 008): events a handler writes in the transaction
// that records its message, which spool relay delivers. This file holds
// the handler's side (emit) and the rows the relay reads and marks; the
// relays' leases are in outboxlease.go. docs/DESIGN.md, "The outbox".

// Outbox is the outbox as the relay and the reports see it (tables outbox
// and outbox_leases): the unpublished rows in each aggregate's id order,
// their publishing, failures and parking, and the relays' leases on
// aggregates. A row is published at most once by the lease's holder, and
// an aggregate's rows are handed out in id order only. Reached by
// DB.Outbox.
type Outbox struct{ db *DB }

// Outbox returns the ledger's outbox.
func (db *DB) Outbox() Outbox { return Outbox{db} }

// maxEventHeaders is the longest an event's headers may be, in bytes of
// their JSON: the narrowest engine's column for them, MariaDB's TEXT.
const maxEventHeaders = 65535

// emit is the ledger's spool.Emitter: one outbox row, in tx.
func (db *DB) emit(ctx context.Context, tx *sql.Tx, msgID string, e spool.Event) error {
	var headers any
	if len(e.Headers) > 0 {
		b, err := json.Marshal(e.Headers)
		if err != nil {
			return fmt.Errorf("emit %s event of %q: headers: %w", e.Type, e.Aggregate, err)
		}
		if len(b) > maxEventHeaders {
			// The same headers would fail the insert on every attempt.
			return spool.Permanent(fmt.Errorf("emit %s event of %q: headers of %d bytes as JSON, over the limit of %d",
				e.Type, e.Aggregate, len(b), maxEventHeaders))
		}
		headers = string(b)
	}
	var cause any
	if msgID != "" {
		cause = msgID
	}
	q := db.dialect.Rebind(`INSERT INTO outbox (aggregate, type, payload, headers, msg_id) VALUES (?, ?, ?, ?, ?)`)
	if _, err := tx.ExecContext(ctx, q, e.Aggregate, e.Type, string(e.Payload), headers, cause); err != nil {
		return fmt.Errorf("emit %s event of %q: %w", e.Type, e.Aggregate, err)
	}
	return nil
}

// OutboxRow is one row of the outbox, as the relay reads it.
type OutboxRow struct {
	// ID is the row's place in the outbox: ids grow with each insert and
	// are never reused.
	ID        int64
	Aggregate string
	Type      string
	Payload   []byte
	// Headers is nil when the row has none.
	Headers map[string]string
	// MsgID is the message whose handler emitted the row, "" if unknown.
	MsgID string
	// Cause are the headers of the message MsgID (its processed row's),
	// empty when it carried none or its row is gone (pruned).
	Cause     spool.MessageHeaders
	CreatedAt time.Time
	// Attempts counts the failed publishes so far.
	Attempts int
	// Parked is set when the row failed for good (Park).
	Parked bool
}

// OutboxHead is the first unpublished row of an aggregate.
type OutboxHead struct {
	Aggregate string
	ID        int64
	// Parked: the head is parked, so with a blocking policy the aggregate
	// waits for an operator.
	Parked bool
	// NextAt is when the head may be tried again after a failure; zero
	// when it has not failed.
	NextAt time.Time
}

// Heads returns the first unpublished row of each aggregate that has
// one, in id order, at most limit of them. With skipParked, parked rows
// are passed over (an aggregate whose only unpublished rows are parked is
// not listed); without it a parked row is its aggregate's head, which
// then waits behind it.
func (o Outbox) Heads(ctx context.Context, skipParked bool, limit int) ([]OutboxHead, error) {
	if err := o.db.open(); err != nil {
		return nil, err
	}
	unparked := ""
	if skipParked {
		unparked = " AND parked_at IS NULL"
	}
	// A look at a large backlog of a few aggregates read every pending row
	// (the grouped query), once a second while the relay was busy: 7% of
	// its CPU at 150 000 rows. Walking the aggregates through the pending
	// index instead, each found as the least above the last (a skip scan),
	// costs a few probes per aggregate, but about three times a row's
	// share of the grouped query: with many aggregates of a row or two it
	// would cost more. So the walk stops after headsWalk aggregates, and
	// past that the grouped query answers.
	group := "aggregate"
	if _, ok := o.db.dialect.(LooseIndexScan); ok {
		// MariaDB jumps from group to group of its pending index
		// (published_at, aggregate, id) itself when the grouping is a
		// prefix of it (published_at is NULL in every group); passing
		// parked rows, whose column the index lacks, it reads every
		// pending row.
		group = "published_at, aggregate"
	} else {
		heads, all, err := o.walkHeads(ctx, unparked)
		if err != nil {
			return nil, o.db.fail("read outbox heads", err)
		}
		if all {
			slices.SortFunc(heads, func(a, b OutboxHead) int { return cmp.Compare(a.ID, b.ID) })
			return heads[:min(len(heads), limit)], nil
		}
	}
	rows, err := o.db.sql.QueryContext(ctx, o.db.dialect.Rebind(`SELECT o.aggregate, o.id, CASE WHEN o.parked_at IS NULL THEN 0 ELSE 1 END, COALESCE(o.next_at, '')
FROM outbox o
WHERE o.id IN (SELECT MIN(id) FROM outbox WHERE published_at IS NULL`+unparked+` GROUP BY `+group+`)
ORDER BY o.id LIMIT ?`), limit)
	if err != nil {
		return nil, o.db.fail("read outbox heads", err)
	}
	out, err := scanHeads(rows)
	if err != nil {
		return nil, o.db.fail("read outbox heads", err)
	}
	return out, nil
}

// headsWalk is the most aggregates Heads walks through the pending index
// before it lets the grouped query answer.
const headsWalk = 512

// walkHeads is Heads by a skip scan of the pending index, in no order:
// the first unpublished row (unparked: the condition that passes parked
// ones) of each aggregate, when there are at most headsWalk aggregates
// with unpublished rows; all reports whether there were.
func (o Outbox) walkHeads(ctx context.Context, unparked string) (heads []OutboxHead, all bool, err error) {
	rows, err := o.db.sql.QueryContext(ctx, o.db.dialect.Rebind(`WITH RECURSIVE aggs(a, n) AS (
    SELECT MIN(aggregate), 1 FROM outbox WHERE published_at IS NULL
    UNION ALL
    SELECT (SELECT MIN(aggregate) FROM outbox WHERE published_at IS NULL AND aggregate > aggs.a), n + 1 FROM aggs WHERE aggs.a IS NOT NULL AND n <= ?
)
SELECT aggs.a, COALESCE(o.id, 0), CASE WHEN o.parked_at IS NULL THEN 0 ELSE 1 END, COALESCE(o.next_at, '')
FROM aggs LEFT JOIN outbox o ON o.id = (SELECT MIN(id) FROM outbox WHERE published_at IS NULL AND aggregate = aggs.a`+unparked+`)
WHERE aggs.a IS NOT NULL`), headsWalk)
	if err != nil {
		return nil, false, err
	}
	walked, err := scanHeads(rows)
	if err != nil || len(walked) > headsWalk {
		return nil, false, err
	}
	for _, h := range walked {
		if h.ID != 0 { // 0: only parked rows, passed over
			heads = append(heads, h)
		}
	}
	return heads, true, nil
}

// scanHeads reads rows of aggregate, id, parked (0 or 1) and next_at,
// and closes them.
func scanHeads(rows *sql.Rows) ([]OutboxHead, error) {
	defer rows.Close()
	var out []OutboxHead
	for rows.Next() {
		var h OutboxHead
		var parked int
		var next string
		if err := rows.Scan(&h.Aggregate, &h.ID, &parked, &next); err != nil {
			return nil, err
		}
		h.Parked = parked != 0
		if next != "" {
			var err error
			if h.NextAt, err = parseTime("next_at", next); err != nil {
				return nil, err
			}
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// RowsAfter returns up to limit unpublished rows of aggregate in id
// order, parked ones included (Parked set), from the row after id after
// on (0: from its first row): a relay that holds the aggregate's lease
// and has sent its rows up to after reads on without waiting for their
// marks. An aggregate's rows commit
// in id order (migration 013), so no row below after can appear later.
func (o Outbox) RowsAfter(ctx context.Context, aggregate string, after int64, limit int) ([]OutboxRow, error) {
	rows, err := o.RowsAfterEach(ctx, []OutboxRead{{Aggregate: aggregate, After: after}}, limit)
	if err != nil {
		return nil, err
	}
	return rows[0], nil
}

// OutboxRead is one aggregate's part of Outbox.RowsAfterEach: its rows
// after row id After.
type OutboxRead struct {
	Aggregate string
	After     int64
}

// RowsAfterEach is RowsAfter for each of reads, in one query and one
// snapshot: out[i] is what RowsAfter(reads[i].Aggregate,
// reads[i].After, limit) returns, limit rows at most of each. A relay
// reading the aggregates it holds pays one statement for all, and the
// database reads each page of their interleaved rows once, not once per
// aggregate. At most maxInList reads at once.
func (o Outbox) RowsAfterEach(ctx context.Context, reads []OutboxRead, limit int) ([][]OutboxRow, error) {
	if err := o.db.open(); err != nil {
		return nil, err
	}
	if len(reads) == 0 || len(reads) > maxInList {
		return nil, fmt.Errorf("read outbox rows: %d aggregates at once, want 1 to %d", len(reads), maxInList)
	}
	// The causing message's headers (migration 017) come with each row:
	// a --sql handler's INSERT names only the event, Emit only msg_id.
	// Each read is a subquery of its own, with its own bound and limit,
	// and the index on (aggregate, id) serves each; their rows are told
	// apart by their read's number.
	const one = `SELECT %d AS r, o.id, o.type, o.payload, COALESCE(o.headers, '') AS headers, COALESCE(o.msg_id, '') AS msg_id, o.created_at, o.attempts,
    CASE WHEN o.parked_at IS NULL THEN 0 ELSE 1 END AS parked,
    COALESCE(p.schema_version, '') AS schema_version, COALESCE(p.traceparent, '') AS traceparent, COALESCE(p.tenant, '') AS tenant
FROM outbox o LEFT JOIN processed p ON p.msg_id = o.msg_id
WHERE o.aggregate = ? AND o.published_at IS NULL AND o.id > ? ORDER BY o.id LIMIT ?`
	var q strings.Builder
	args := make([]any, 0, 3*len(reads))
	for i, r := range reads {
		sub := fmt.Sprintf(one, i) // a number, which PostgreSQL types, where a parameter it cannot
		switch {
		case len(reads) == 1:
			q.WriteString(sub)
		case i == 0:
			fmt.Fprintf(&q, "SELECT * FROM (%s) AS r%d", sub, i)
		default:
			fmt.Fprintf(&q, "\nUNION ALL SELECT * FROM (%s) AS r%d", sub, i)
		}
		args = append(args, r.Aggregate, r.After, limit)
	}
	rows, err := o.db.sql.QueryContext(ctx, o.db.dialect.Rebind(q.String()), args...)
	if err != nil {
		return nil, o.db.fail("read outbox rows", err)
	}
	defer rows.Close()
	out := make([][]OutboxRow, len(reads))
	for rows.Next() {
		var i int
		var r OutboxRow
		var headers, created string
		var parked int
		if err := rows.Scan(&i, &r.ID, &r.Type, &r.Payload, &headers, &r.MsgID, &created, &r.Attempts, &parked,
			&r.Cause.Version, &r.Cause.Trace, &r.Cause.Tenant); err != nil {
			return nil, o.db.fail("read outbox rows", err)
		}
		if i < 0 || i >= len(reads) {
			return nil, o.db.fail("read outbox rows", fmt.Errorf("row %d: read %d of %d", r.ID, i, len(reads)))
		}
		r.Aggregate = reads[i].Aggregate
		r.Parked = parked != 0
		if r.CreatedAt, err = parseTime("created_at", created); err != nil {
			return nil, o.db.fail("read outbox rows", fmt.Errorf("row %d: %w", r.ID, err))
		}
		if headers != "" {
			if err := json.Unmarshal([]byte(headers), &r.Headers); err != nil {
				return nil, o.db.fail("read outbox rows", fmt.Errorf("row %d: headers are not a JSON object of strings: %w", r.ID, err))
			}
		}
		out[i] = append(out[i], r)
	}
	if err := rows.Err(); err != nil {
		return nil, o.db.fail("read outbox rows", err)
	}
	// UNION ALL keeps no order across its parts, nor promises one within
	// them: each read's rows are put back in id order.
	for _, rs := range out {
		slices.SortFunc(rs, func(a, b OutboxRow) int { return cmp.Compare(a.ID, b.ID) })
	}
	return out, nil
}

// FailPublish records a failed publish of row id: its attempts counted,
// the error kept, no new attempt before nextAt.
func (o Outbox) FailPublish(ctx context.Context, id int64, cause string, nextAt time.Time) error {
	return o.db.outboxWrite(ctx, "record outbox failure", `UPDATE outbox SET attempts = attempts + 1, last_error = ?, next_at = ? WHERE id = ?`,
		cause, formatTime(nextAt), id)
}

// Park takes row id out of the relay's work for good, with its reason: a
// dead letter of the outbox, until an operator unparks it (Unpark).
func (o Outbox) Park(ctx context.Context, id int64, reason string, at time.Time) error {
	return o.db.outboxWrite(ctx, "park outbox row", `UPDATE outbox SET attempts = attempts + 1, last_error = ?, park_reason = ?, parked_at = ? WHERE id = ?`,
		reason, reason, formatTime(at), id)
}

// Unpark puts the parked, unpublished rows back into the relay's work with
// their attempts reset: all of them, or those of aggregate when it is not
// "". It returns how many it put back.
func (o Outbox) Unpark(ctx context.Context, aggregate string) (int64, error) {
	if err := o.db.open(); err != nil {
		return 0, err
	}
	q := `UPDATE outbox SET parked_at = NULL, park_reason = NULL, attempts = 0, next_at = NULL WHERE parked_at IS NOT NULL AND published_at IS NULL`
	var args []any
	if aggregate != "" {
		q += ` AND aggregate = ?`
		args = append(args, aggregate)
	}
	var n int64
	err := o.db.writeTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, o.db.dialect.Rebind(q), args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, o.db.fail("unpark outbox rows", err)
	}
	return n, nil
}

func (db *DB) outboxWrite(ctx context.Context, op, query string, args ...any) error {
	if err := db.open(); err != nil {
		return err
	}
	q := db.dialect.Rebind(query)
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	})
	if err != nil {
		return db.fail(op, err)
	}
	return nil
}

// OutboxStats is the state of the outbox, for status and metrics.
type OutboxStats struct {
	// Pending counts the rows not yet published and not parked; Oldest is
	// the creation time of the oldest of them (zero when there is none).
	Pending int64
	Oldest  time.Time
	// Parked counts the parked rows; Published the published ones still
	// kept (prune removes them).
	Parked, Published int64
	// Failing counts the pending rows that failed at least once.
	Failing int64
}

// ErrNoOutbox is wrapped by Outbox.Stats on a ledger without the outbox
// table (a read-only open of a ledger not migrated yet).
var ErrNoOutbox = errors.New("ledger has no outbox table")

// Stats counts the outbox's rows. On a ledger whose schema
// predates the outbox (opened read-only, not migrated), it fails with
// ErrNoOutbox.
func (o Outbox) Stats(ctx context.Context) (OutboxStats, error) {
	var s OutboxStats
	if err := o.db.open(); err != nil {
		return s, err
	}
	var migrated int
	if err := o.db.sql.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = 8`).Scan(&migrated); err != nil {
		return s, o.db.fail("count outbox rows", err)
	}
	if migrated == 0 {
		return s, o.db.fail("count outbox rows", ErrNoOutbox)
	}
	var oldest string
	err := o.db.sql.QueryRowContext(ctx, `SELECT
    COALESCE(SUM(CASE WHEN published_at IS NULL AND parked_at IS NULL THEN 1 ELSE 0 END), 0),
    COALESCE(MIN(CASE WHEN published_at IS NULL AND parked_at IS NULL THEN created_at END), ''),
    COALESCE(SUM(CASE WHEN published_at IS NULL AND parked_at IS NOT NULL THEN 1 ELSE 0 END), 0),
    COALESCE(SUM(CASE WHEN published_at IS NOT NULL THEN 1 ELSE 0 END), 0),
    COALESCE(SUM(CASE WHEN published_at IS NULL AND parked_at IS NULL AND attempts > 0 THEN 1 ELSE 0 END), 0)
FROM outbox`).Scan(&s.Pending, &oldest, &s.Parked, &s.Published, &s.Failing)
	if err != nil {
		return s, o.db.fail("count outbox rows", err)
	}
	if oldest != "" {
		if s.Oldest, err = parseTime("created_at", oldest); err != nil {
			return s, o.db.fail("count outbox rows", err)
		}
	}
	return s, nil
}

// ParkedRow is a parked outbox row, for reports.
type ParkedRow struct {
	ID                int64
	Aggregate, Type   string
	Reason            string
	Attempts          int
	CreatedAt, Parked time.Time
}

// ParkedRows returns up to limit parked, unpublished rows in id order.
func (o Outbox) ParkedRows(ctx context.Context, limit int) ([]ParkedRow, error) {
	return queryAll(ctx, o.db, "read parked outbox rows", o.db.dialect.Rebind(`SELECT id, aggregate, type, COALESCE(park_reason, ''), attempts, created_at, parked_at
FROM outbox WHERE parked_at IS NOT NULL AND published_at IS NULL ORDER BY id LIMIT ?`), []any{limit},
		func(rows *sql.Rows) (ParkedRow, error) {
			var p ParkedRow
			var created, parked string
			err := rows.Scan(&p.ID, &p.Aggregate, &p.Type, &p.Reason, &p.Attempts, &created, &parked)
			if err == nil {
				p.CreatedAt, err = parseTime("created_at", created)
			}
			if err == nil {
				p.Parked, err = parseTime("parked_at", parked)
			}
			return p, err
		})
}
