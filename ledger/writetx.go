package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"time"
)

// maxTries is how many times writeTx runs a transaction that the engine
// keeps giving up (Dialect.Retry) before it reports the error.
const maxTries = 10

// writeTx runs fn in a write transaction of the consumer's hot paths
// (Record, Reserve, Settle) and commits it. It takes the process's write
// turn first (beginWrite), ends the turn after the commit or rollback, and
// rolls back when fn or the commit fails. When the engine gave the
// transaction up (Dialect.Retry: a deadlock victim), it runs fn again in
// a new transaction, after a short random pause, up to maxTries times in
// all. fn must therefore start from nothing each time: whatever it
// computes for the caller it must set afresh, as the last run's is the
// one that committed.
func (db *DB) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return db.retried(ctx, func() error { return db.txOnce(ctx, fn, true) })
}

// inTx runs fn in a write transaction of the operator's paths (replay,
// discard, holds, tasks, the policy, the audit, repairs) and commits it,
// rolling back when fn or the commit fails. These take no write turn:
// they are rare, and wait in the engine like any other process's. A
// transaction the engine gave up (Dialect.Retry: InnoDB's deadlock
// victim, as two operators adopting a policy at once on a fresh table
// make) runs again as writeTx's do, so fn too must start from nothing
// each time.
func (db *DB) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return db.retried(ctx, func() error { return db.txOnce(ctx, fn, false) })
}

// retried runs once until it succeeds, fails with an error the engine
// does not give up on (Dialect.Retry), ctx ends, or maxTries runs failed.
func (db *DB) retried(ctx context.Context, once func() error) error {
	for try := 1; ; try++ {
		err := once()
		if err == nil || try == maxTries || !db.dialect.Retry(err) || ctx.Err() != nil {
			return err
		}
		// Random, and longer with each try, so that the transactions that
		// deadlocked do not meet again in step.
		pause := time.Duration(1+rand.IntN(1<<min(try, 6))) * time.Millisecond
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}

// txOnce is one try of writeTx (turn: the write turn taken first,
// beginWrite) or of inTx.
func (db *DB) txOnce(ctx context.Context, fn func(tx *sql.Tx) error, turn bool) error {
	var (
		tx      *sql.Tx
		release = func() {}
		err     error
	)
	if turn {
		tx, release, err = db.beginWrite(ctx)
	} else if tx, err = db.sql.BeginTx(ctx, nil); err != nil {
		err = fmt.Errorf("begin: %w", err)
	}
	if err != nil {
		return err
	}
	defer release()
	// After Commit, Rollback is a no-op returning sql.ErrTxDone; before it,
	// the error that matters is the one being returned.
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// beginWrite begins a write transaction of the consumer's hot paths
// and returns it with the function that ends its turn, to be called after
// its Commit or Rollback.
//
// On a single-writer engine (SQLite), a database admits one writer at a
// time, and a writer that finds the lock taken waits in SQLite's busy
// handler, which polls with sleeps that grow to 100 ms: two write
// transactions of one process at once (a consumer with a Caller reserves
// and settles from two goroutines) would leave one of them asleep long
// after the lock was free, while the other committed again. So the
// process's write transactions take turns on a lock of their own first,
// and wait for it without polling; only writers in other processes meet
// the busy handler. Engines whose transactions run in parallel, locking
// rows, take no such turn. With Options.Turn, the turn is then taken
// across processes too.
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
// usefully run at once on this ledger (spool.Ledger): 1 on a
// single-writer engine (SQLite), whose writers take turns; on an engine
// whose transactions lock rows, the pool's connections less two, left
// for the transaction that reserves the next batch and for recovery's and
// reports' queries. A consumer with a Caller commits that many groups of
// outcomes at once, and a plain drain records that many batches at once.
func (l Consumer) ConcurrentWrites() int {
	if l.db.writeTurn != nil {
		return 1
	}
	return max(1, l.db.sql.Stats().MaxOpenConnections-2)
}
