package ledger

import (
	"context"
	"database/sql"
	"time"
)

// The relays' leases on aggregates (outbox_leases, migration 008): a relay
// publishes an aggregate's rows only while it holds the aggregate's lease,
// so that two relays at once never interleave one aggregate's events; the
// lease of a relay that died runs out, and another takes the aggregate
// over. The same statements on every engine: no engine's own locking.

// AcquireLease gives owner the lease on aggregate until expires, when no
// other owner holds an unexpired one, and reports whether owner holds it
// now. now is the time leases are compared with.
func (db *DB) AcquireLease(ctx context.Context, owner, aggregate string, now, expires time.Time) (bool, error) {
	if err := db.open(); err != nil {
		return false, err
	}
	take := db.dialect.Rebind(`UPDATE outbox_leases SET owner = ?, expires = ? WHERE aggregate = ? AND (owner = ? OR expires < ?)`)
	insert := db.dialect.Rebind(db.dialect.InsertNew(`INSERT INTO outbox_leases (aggregate, owner, expires) VALUES (?, ?, ?)`, "aggregate", ""))
	held := false
	err := db.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, take, owner, formatTime(expires), aggregate, owner, formatTime(now)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, insert, aggregate, owner, formatTime(expires)); err != nil {
			return err
		}
		// Not the statements' RowsAffected: MySQL counts an UPDATE that
		// changed nothing (the same expiry) as no row.
		var err error
		held, err = holdsLease(ctx, tx, db.dialect, owner, aggregate)
		return err
	})
	if err != nil {
		return false, db.fail("take outbox lease", err)
	}
	return held, nil
}

// ReleaseLease gives up owner's lease on aggregate, if owner holds it.
func (db *DB) ReleaseLease(ctx context.Context, owner, aggregate string) error {
	return db.outboxWrite(ctx, "release outbox lease", `DELETE FROM outbox_leases WHERE aggregate = ? AND owner = ?`, aggregate, owner)
}

// renewLease extends owner's lease on aggregate to expires in tx, and
// reports whether owner still held it.
func renewLease(ctx context.Context, tx *sql.Tx, d Dialect, owner, aggregate string, expires time.Time) (bool, error) {
	if _, err := tx.ExecContext(ctx, d.Rebind(`UPDATE outbox_leases SET expires = ? WHERE aggregate = ? AND owner = ?`), formatTime(expires), aggregate, owner); err != nil {
		return false, err
	}
	return holdsLease(ctx, tx, d, owner, aggregate)
}

// holdsLease reports whether owner holds the lease on aggregate, in tx.
func holdsLease(ctx context.Context, tx *sql.Tx, d Dialect, owner, aggregate string) (bool, error) {
	var n int
	err := tx.QueryRowContext(ctx, d.Rebind(`SELECT COUNT(*) FROM outbox_leases WHERE aggregate = ? AND owner = ?`), aggregate, owner).Scan(&n)
	return n > 0, err
}
