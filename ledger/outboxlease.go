package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The relays' leases on aggregates (outbox_leases, migration 008): a relay
// publishes an aggregate's rows only while it holds the aggregate's lease,
// so that two relays at once never interleave one aggregate's events; the
// lease of a relay that died runs out, and another takes the aggregate
// over. The same statements on every engine: no engine's own locking.

// AcquireLeases gives owner the lease on each of aggregates until
// expires, where no other owner holds an unexpired one (now is the time
// leases are compared with), in one transaction, and returns those of
// aggregates whose lease owner holds now, in their order. A relay
// starting work on many aggregates at once pays one commit for all of
// them.
func (o Outbox) AcquireLeases(ctx context.Context, owner string, aggregates []string, now, expires time.Time) ([]string, error) {
	if err := o.db.open(); err != nil {
		return nil, err
	}
	if len(aggregates) == 0 {
		return nil, nil
	}
	take := o.db.dialect.Rebind(`UPDATE outbox_leases SET owner = ?, expires = ? WHERE aggregate = ? AND (owner = ? OR expires < ?)`)
	insert := o.db.dialect.Rebind(o.db.dialect.InsertNew(`INSERT INTO outbox_leases (aggregate, owner, expires) VALUES (?, ?, ?)`, "aggregate", ""))
	var held []string
	err := o.db.writeTx(ctx, func(tx *sql.Tx) error {
		held = held[:0]
		for _, agg := range aggregates {
			if _, err := tx.ExecContext(ctx, take, owner, formatTime(expires), agg, owner, formatTime(now)); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, insert, agg, owner, formatTime(expires)); err != nil {
				return err
			}
		}
		h, err := heldLeases(ctx, tx, o.db.dialect, owner, aggregates)
		held = h
		return err
	})
	if err != nil {
		return nil, o.db.fail("take outbox leases", err)
	}
	return held, nil
}

// heldLeases returns those of aggregates whose lease owner holds, in tx,
// in their order.
func heldLeases(ctx context.Context, tx *sql.Tx, d Dialect, owner string, aggregates []string) ([]string, error) {
	holds := map[string]bool{}
	for chunk := range slices.Chunk(aggregates, maxInList) {
		args := []any{owner}
		for _, a := range chunk {
			args = append(args, a)
		}
		rows, err := tx.QueryContext(ctx, d.Rebind(`SELECT aggregate FROM outbox_leases WHERE owner = ? AND aggregate IN (?`+strings.Repeat(", ?", len(chunk)-1)+`)`), args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var a string
			if err := rows.Scan(&a); err != nil {
				rows.Close()
				return nil, err
			}
			holds[a] = true
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return nil, err
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	var held []string
	for _, a := range aggregates {
		if holds[a] {
			held = append(held, a)
		}
	}
	return held, nil
}

// maxInList bounds the values of one IN (...) list: well within every
// engine's limit on a statement's parameters.
const maxInList = 500

// OutboxCommit is what a relay writes in one transaction after a stretch
// of acknowledgements (Outbox.CommitPublished).
type OutboxCommit struct {
	// Published are the ids of the rows the target acknowledged, at At,
	// each after every earlier row of its aggregate was acknowledged too.
	Published []int64
	// Target names the target in the rows' target column.
	Target string
	At     time.Time
	// Renew are the aggregates the relay goes on publishing: their leases
	// are extended to Expires.
	Renew   []string
	Expires time.Time
	// Release are the aggregates the relay has finished with for now:
	// their leases are given up.
	Release []string
}

// CommitPublished marks c.Published published, renews owner's leases on
// c.Renew and releases those on c.Release, in one transaction: a relay
// that keeps many events in flight pays one commit for many
// acknowledgements. It returns the aggregates of c.Renew whose lease
// owner no longer held (it ran out and another relay took it): their rows
// are marked all the same, since they were acknowledged, but the caller
// must stop publishing those aggregates.
func (o Outbox) CommitPublished(ctx context.Context, owner string, c OutboxCommit) ([]string, error) {
	if err := o.db.open(); err != nil {
		return nil, err
	}
	var lost []string
	err := o.db.writeTx(ctx, func(tx *sql.Tx) error {
		lost = lost[:0]
		// The rows are locked in ascending id order, ranges and lists
		// interleaved, as every write of the ledger locks its keys: two
		// relays marking the same rows (one took the other's lease over)
		// then wait for each other instead of deadlocking, which
		// PostgreSQL reports as a fault (its dialect does not retry).
		//
		// An UPDATE locks its rows in the order its plan meets them: a
		// bitmap scan meets them in the table's physical order, which a
		// row's updates change, not by id. So each range or list is
		// locked first by a SELECT that sorts it (FOR UPDATE locks above
		// the sort), each above the one before; its UPDATE then waits
		// for no one. A single writer needs none of it.
		mark := func(where string, ids ...any) error {
			if !o.db.dialect.SingleWriter() {
				if err := lockOutboxRows(ctx, tx, o.db.dialect, where, ids...); err != nil {
					return err
				}
			}
			_, err := tx.ExecContext(ctx, o.db.dialect.Rebind(`UPDATE outbox SET published_at = ?, target = ?, next_at = NULL
WHERE `+where), append([]any{formatTime(c.At), c.Target}, ids...)...)
			return err
		}
		runs, scattered := idRuns(c.Published)
		for len(runs) > 0 || len(scattered) > 0 {
			if len(runs) > 0 && (len(scattered) == 0 || runs[0][0] < scattered[0]) {
				if err := mark(`published_at IS NULL AND id BETWEEN ? AND ?`, runs[0][0], runs[0][1]); err != nil {
					return err
				}
				runs = runs[1:]
				continue
			}
			n := len(scattered) // the ids below the next range, at most maxInList
			if len(runs) > 0 {
				n, _ = slices.BinarySearch(scattered, runs[0][0])
			}
			chunk := scattered[:min(n, maxInList)]
			scattered = scattered[len(chunk):]
			ids := make([]any, len(chunk))
			for i, id := range chunk {
				ids[i] = id
			}
			if err := mark(`published_at IS NULL AND id IN (`+placeholders(len(chunk))+`)`, ids...); err != nil {
				return err
			}
		}
		for chunk := range slices.Chunk(c.Renew, maxInList) {
			args := []any{formatTime(c.Expires), owner}
			for _, a := range chunk {
				args = append(args, a)
			}
			if _, err := tx.ExecContext(ctx, o.db.dialect.Rebind(`UPDATE outbox_leases SET expires = ? WHERE owner = ? AND aggregate IN (?`+strings.Repeat(", ?", len(chunk)-1)+`)`), args...); err != nil {
				return err
			}
		}
		if len(c.Renew) > 0 {
			held, err := heldLeases(ctx, tx, o.db.dialect, owner, c.Renew)
			if err != nil {
				return err
			}
			holds := map[string]bool{}
			for _, a := range held {
				holds[a] = true
			}
			for _, a := range c.Renew {
				if !holds[a] {
					lost = append(lost, a)
				}
			}
		}
		for chunk := range slices.Chunk(c.Release, maxInList) {
			args := []any{owner}
			for _, a := range chunk {
				args = append(args, a)
			}
			if _, err := tx.ExecContext(ctx, o.db.dialect.Rebind(`DELETE FROM outbox_leases WHERE owner = ? AND aggregate IN (?`+strings.Repeat(", ?", len(chunk)-1)+`)`), args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, o.db.fail("mark outbox rows published", err)
	}
	return lost, nil
}

// lockOutboxRows locks, in tx, the outbox rows that where selects, in
// ascending id order (FOR UPDATE above the sort), before CommitPublished's
// UPDATE of the same rows. Its caller keeps the parameters few (a range,
// or a list of at most maxInList ids).
func lockOutboxRows(ctx context.Context, tx *sql.Tx, d Dialect, where string, args ...any) error {
	rows, err := tx.QueryContext(ctx, d.Rebind(`SELECT id FROM outbox WHERE `+where+` ORDER BY id FOR UPDATE`), args...)
	if err != nil {
		return fmt.Errorf("lock outbox rows: %w", err)
	}
	// Reading the rows takes their locks: each is fetched under FOR UPDATE.
	for rows.Next() {
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("lock outbox rows: %w", err)
	}
	return nil
}

// minRun is the shortest run of consecutive ids idRuns gives as a range.
const minRun = 32

// idRuns splits ids into the runs of at least minRun consecutive ids,
// as their first and last, and the rest. A relay's marks are mostly such
// runs (its aggregates' rows interleave, and it settles them together),
// and a database updates a range of ids in about half the time it takes
// for the same ids listed (no list to build and look up, one seek).
func idRuns(ids []int64) (runs [][2]int64, rest []int64) {
	sorted := slices.Compact(slices.Sorted(slices.Values(ids)))
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j] == sorted[j-1]+1 {
			j++
		}
		if j-i >= minRun {
			runs = append(runs, [2]int64{sorted[i], sorted[j-1]})
		} else {
			rest = append(rest, sorted[i:j]...)
		}
		i = j
	}
	return runs, rest
}
