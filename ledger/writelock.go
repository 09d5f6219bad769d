package ledger

import (
	"context"
	"database/sql"
	"fmt"
)

// beginWrite begins a write transaction of the consumer's hot paths
// (Record, Reserve, Settle) and returns it with the function that ends
// its turn, to be called after its Commit or Rollback.
//
// On SQLite, a database admits one writer at a time, and a writer that
// finds the lock taken waits in SQLite's busy handler, which polls with
// sleeps that grow to 100 ms: two write transactions of one process at once
// (a consumer with a Caller reserves and settles from two goroutines) would
// leave one of them asleep long after the lock was free, while the other
// committed again. So the process's write transactions take turns on a
// lock of their own first, and wait for it without polling; only writers
// in other processes meet the busy handler. PostgreSQL's transactions run
// in parallel, locking rows, and take no such turn. With Options.Turn,
// the turn is then taken across processes too.
func (db *DB) beginWrite(ctx context.Context) (*sql.Tx, func(), error) {
	release := func() {}
	if db.writeTurn != nil {
		select {
		case db.writeTurn <- struct{}{}:
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("begin: %w", ctx.Err())
		}
		release = func() { <-db.writeTurn }
	}
	if db.turn != nil {
		own, shared := release, db.turn.Take()
		release = func() { shared(); own() }
	}
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	return tx, release, nil
}

// ConcurrentWrites is how many of the consumer's write transactions may
// usefully run at once on this ledger: 1 on SQLite, whose writers take
// turns; on PostgreSQL, whose transactions lock rows, the pool's
// connections less two, left for the transaction that reserves the next
// batch and for recovery's and reports' queries. A consumer with a Caller
// commits that many groups of outcomes at once.
func (db *DB) ConcurrentWrites() int {
	if db.writeTurn != nil {
		return 1
	}
	return max(1, db.sql.Stats().MaxOpenConnections-2)
}
