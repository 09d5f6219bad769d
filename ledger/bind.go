package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/queue"
)

// A ledger belongs to one queue: the queue's identity (queue.Dir.ID, the
// queue.id file) is recorded in the ledger's meta table when the two are
// first used together, and every command checks it after. That is what
// keeps the core promise when the ledger is not the one the queue was
// consumed into: a deleted, emptied or mistyped ledger, or two queues
// pointed at one database, would otherwise pass for a ledger that has
// simply never seen the queue's old messages, and process them again.
// docs/DESIGN.md, "Queue identity", has the whole rule.

// ErrOtherQueue is wrapped by Bind when the ledger belongs to another queue.
var ErrOtherQueue = errors.New("ledger belongs to another queue")

// ErrNewLedger is wrapped by Bind when the ledger holds no record at all
// while the queue's done/ or error/ holds messages: the ledger was deleted,
// emptied or mistyped, and consuming into it would process old messages
// again.
var ErrNewLedger = errors.New("ledger has no record of this queue's messages")

// ErrNoQueueID is wrapped by Bind when the ledger belongs to a queue but
// the queue directory has no queue.id file (it was deleted, or this is
// another directory).
var ErrNoQueueID = errors.New("queue has no identity")

// metaQueueID is the meta row holding the identity of the ledger's queue.
const metaQueueID = "queue_id"

// QueueID returns the identity of the queue the ledger belongs to, or ""
// when it belongs to none yet.
func (db *DB) QueueID(ctx context.Context) (string, error) {
	return db.metaValue(ctx, metaQueueID, "read queue identity")
}

// metaValue returns the value of the meta row name, or "" when there is
// none; op names the read in its error.
func (db *DB) metaValue(ctx context.Context, name, op string) (string, error) {
	if err := db.open(); err != nil {
		return "", err
	}
	var v string
	err := db.sql.QueryRowContext(ctx, db.dialect.Rebind(`SELECT value FROM meta WHERE name = ?`), name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", db.fail(op, err)
	}
	return v, nil
}

// bindQueueID records id as the ledger's queue unless it already has one,
// and returns the one it has after: id, or the other queue's when another
// binder won.
// With an audit entry (e.Actor set), the bind, if this call made it, is
// audited in the same transaction as action "bind".
func (db *DB) bindQueueID(ctx context.Context, id string, e AuditEntry) (string, error) {
	e.Action, e.Selection = AuditBind, auditSelection("queue_id", id)
	if err := db.auditOnce(ctx, e, db.dialect.Rebind(db.dialect.InsertNew(`INSERT INTO meta (name, value) VALUES (?, ?)`, "name", "")), metaQueueID, id); err != nil {
		return "", db.fail("record queue identity", err)
	}
	return db.QueueID(ctx)
}

// Empty reports whether the ledger holds no record of any delivery: no
// processed row, no duplicate or dead-letter record, no replay, and no
// prune horizon (Fsck.PruneHorizon): a ledger that spool prune emptied of every
// row on purpose still holds the queue's history, and is neither new nor
// one to rebuild.
func (db *DB) Empty(ctx context.Context) (bool, error) {
	if err := db.open(); err != nil {
		return false, err
	}
	var n int
	err := db.sql.QueryRowContext(ctx, db.dialect.Rebind(`SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM processed LIMIT 1) p)
    + (SELECT COUNT(*) FROM (SELECT 1 FROM deliveries LIMIT 1) d)
    + (SELECT COUNT(*) FROM (SELECT 1 FROM replays LIMIT 1) r)
    + (SELECT COUNT(*) FROM meta WHERE name = ?)`), metaPruneHorizon).Scan(&n)
	if err != nil {
		return false, db.fail("check for records", err)
	}
	return n == 0, nil
}

// BindMode says what Bind may do besides checking.
type BindMode int

const (
	// BindCheck only checks: for reports, which never write.
	BindCheck BindMode = iota
	// BindWrite also binds a queue and a ledger that belong to nobody yet
	// (a new queue, or one made before queue identities existed), writing
	// the queue's queue.id first and then the ledger's row, so that a crash
	// between the two leaves a state the next Bind completes.
	BindWrite
	// BindNew is BindWrite that also accepts an empty ledger for a queue
	// whose done/ or error/ holds messages: the operator starts a new
	// ledger on purpose, knowing that old messages delivered again will be
	// processed again.
	BindNew
)

// Bind checks that the ledger and the queue belong together, and with
// BindWrite or BindNew binds them when neither belongs to anything yet. It
// returns the queue's identity (empty only for BindCheck on an unbound
// pair).
//
// It fails with ErrOtherQueue when the ledger records another queue's
// identity; ErrNoQueueID when the ledger records one and the queue has no
// queue.id; and ErrNewLedger when the ledger holds no record at all, the
// queue's done/ or error/ holds messages, and mode is not BindNew (for
// BindCheck, only when the ledger is bound to no queue: a report may still
// read the queue's own ledger that lost its records). An
// unbound ledger that holds records is taken for the queue's own: that is
// how ledgers made before queue identities existed are adopted. In every
// mode it fails with ErrRebuilding while the ledger is being rebuilt from
// the directories (BeginRebuild): checked first, so that a refused Bind
// writes nothing, and again after every other read.
func Bind(ctx context.Context, db *DB, d *queue.Dir, mode BindMode) (string, error) {
	return BindAudited(ctx, db, d, mode, AuditEntry{})
}

// Audit actions of a bind.
const (
	// AuditBind: a ledger bound to its queue for the first time.
	AuditBind = "bind"
	// AuditNewLedger: an empty ledger accepted on purpose (BindNew) for a
	// queue with history.
	AuditNewLedger = "new-ledger"
)

// BindAudited is Bind that audits what it changes, as e's actor (e's
// Action and Selection are its own): the ledger bound to the queue for the
// first time (action AuditBind) and a ledger started empty on purpose
// (AuditNewLedger), each written in the transaction that records it, so
// that it is audited exactly when it happened, by whichever of several
// binders at once made it. With an e that has no Actor it is Bind.
func BindAudited(ctx context.Context, db *DB, d *queue.Dir, mode BindMode, e AuditEntry) (string, error) {
	if err := checkRebuilding(ctx, db); err != nil {
		return "", err
	}
	id, err := bind(ctx, db, d, mode, e)
	if err != nil {
		return "", err
	}
	if err := checkRebuilding(ctx, db); err != nil {
		return "", err
	}
	return id, nil
}

func bind(ctx context.Context, db *DB, d *queue.Dir, mode BindMode, e AuditEntry) (string, error) {
	// The ledger first: a binder writes queue.id before the ledger's row,
	// so a ledger found bound means queue.id is already there to be read.
	// Read the other way round, a consumer starting beside another's first
	// bind could see no queue.id and then a bound ledger, and refuse.
	lid, err := db.QueueID(ctx)
	if err != nil {
		return "", fmt.Errorf("bind ledger: %w", err)
	}
	qid, err := d.ID()
	if err != nil {
		return "", fmt.Errorf("bind ledger: %w", err)
	}
	switch {
	case lid != "" && qid == lid:
		switch mode {
		case BindWrite:
			// The queue's own ledger, restored from a copy taken before
			// the first consume, say: with no record at all while done/ or
			// error/ holds messages, it is as good as an empty one for a
			// writer, unless it was started empty on purpose.
			if err := checkHistory(ctx, db, d, true); err != nil {
				return "", err
			}
		case BindNew:
			if err := db.markNew(ctx, qid, e); err != nil {
				return "", fmt.Errorf("bind ledger: %w", err)
			}
		}
		return qid, nil
	case lid != "" && qid != "":
		return "", fmt.Errorf("%w: the ledger is queue %s's, and %s is queue %s", ErrOtherQueue, lid, d.Path(), qid)
	case lid != "":
		return "", fmt.Errorf("%w: %s has no %s, and the ledger belongs to queue %s", ErrNoQueueID, d.Path(), queue.IDFile, lid)
	}
	if mode != BindNew {
		if err := checkHistory(ctx, db, d, false); err != nil {
			return "", err
		}
	}
	if mode == BindCheck {
		return qid, nil
	}
	if qid == "" {
		if qid, err = d.EnsureID(); err != nil {
			return "", fmt.Errorf("bind ledger: %w", err)
		}
	}
	got, err := db.bindQueueID(ctx, qid, e)
	if err != nil {
		return "", fmt.Errorf("bind ledger: %w", err)
	}
	if got != qid {
		return "", fmt.Errorf("%w: the ledger is queue %s's, and %s is queue %s", ErrOtherQueue, got, d.Path(), qid)
	}
	if mode == BindNew {
		if err := db.markNew(ctx, qid, e); err != nil {
			return "", fmt.Errorf("bind ledger: %w", err)
		}
	}
	return qid, nil
}

// metaNewLedger is the meta row that records when a ledger was started
// empty on purpose (BindNew) for a queue: an empty ledger bound to its
// queue is then accepted by a writer, though done/ or error/ holds
// messages.
const metaNewLedger = "new_ledger_at"

// markNew records, if the ledger holds no record yet, that it was started
// empty on purpose.
// With an audit entry (e.Actor set), the mark, if this call made it, is
// audited in the same transaction as action "new-ledger".
func (db *DB) markNew(ctx context.Context, qid string, e AuditEntry) error {
	empty, err := db.Empty(ctx)
	if err != nil || !empty {
		return err
	}
	e.Action, e.Selection = AuditNewLedger, auditSelection("queue_id", qid)
	if err := db.auditOnce(ctx, e, db.dialect.Rebind(db.dialect.InsertNew(`INSERT INTO meta (name, value) VALUES (?, ?)`, "name", "")), metaNewLedger, formatTime(time.Now())); err != nil {
		return db.fail("record a new ledger", err)
	}
	return nil
}

// checkHistory fails with ErrNewLedger when the ledger holds no record at
// all and the queue's done/ or error/ holds messages; for a ledger bound to
// the queue, only when done/ does, and not when the ledger was started
// empty on purpose (markNew).
//
// The directories are read before the ledger. A consumer commits a
// message's record before it moves the file into done/ or error/, so a
// file seen there was recorded before the ledger is read. Read the other
// way round, a consumer starting beside another could find the ledger
// empty, then the other's first message moved into done/, and refuse a
// ledger that is not empty at all.
func checkHistory(ctx context.Context, db *DB, d *queue.Dir, bound bool) error {
	var (
		has    bool
		err    error
		stages = "done/ or error/"
	)
	if bound {
		// The queue's own ledger: only done/ counts, whose messages it
		// must have recorded as processed; error/ may hold a file dropped
		// there by hand since spool init.
		has, err = d.HasDone()
		stages = "done/"
	} else {
		has, err = d.HasHistory()
	}
	if err != nil {
		return fmt.Errorf("bind ledger: %w", err)
	}
	if !has {
		return nil
	}
	empty, err := db.Empty(ctx)
	if err != nil {
		return fmt.Errorf("bind ledger: %w", err)
	}
	if !empty {
		return nil
	}
	if bound {
		var n int
		if err := db.sql.QueryRowContext(ctx, db.dialect.Rebind(`SELECT COUNT(*) FROM meta WHERE name = ?`), metaNewLedger).Scan(&n); err != nil {
			return fmt.Errorf("bind ledger: %w", db.fail("read meta", err))
		}
		if n > 0 {
			return nil
		}
	}
	return fmt.Errorf("%w: the ledger is empty, and %s holds messages in %s", ErrNewLedger, d.Path(), stages)
}
