package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queue"
)

// ledgerUse says what a command does with its ledger, which decides what
// opening it may create and bind (docs/DESIGN.md, "Queue identity").
type ledgerUse int

const (
	// readLedger: reports and checks. The ledger must exist; nothing is
	// created, migrated into an empty file, or bound.
	readLedger ledgerUse = iota
	// writeLedger: init, consume, replay. A ledger is created and bound to
	// the queue only when the queue has no history (nothing in done/ or
	// error/), or on purpose with --new-ledger.
	writeLedger
)

// ledgerOpts is how a command opens its ledger.
type ledgerOpts struct {
	use ledgerUse
	// relaxed: SQLite's synchronous=NORMAL (--durability relaxed).
	relaxed bool
	// newLedger: --new-ledger, an empty ledger for a queue with history.
	newLedger bool
}

// ledgerError is a refusal of openLedgerFor: the ledger is missing, empty,
// or another queue's. Configuration, exit 2. It wraps the cause (a
// ledger.Bind sentinel, when there is one).
type ledgerError struct {
	msg string
	err error
}

func (e *ledgerError) Error() string { return e.msg }
func (e *ledgerError) Unwrap() error { return e.err }

func refuse(cause error, format string, args ...any) error {
	return &ledgerError{msg: fmt.Sprintf(format, args...), err: cause}
}

// repairHint is what to run when the ledger of the queue at dir lost its
// records.
func repairHint(dir string) string {
	return "Try: spool fsck " + dir + " --repair to rebuild the ledger from the directories, " +
		"or --new-ledger to start an empty one on purpose (redeliveries of old messages are then processed again)"
}

// addNewLedgerFlag registers --new-ledger on fs.
func addNewLedgerFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("new-ledger", false, "accept a missing or empty ledger for a queue whose done/ or error/ holds messages (their redeliveries are then processed again)")
}

// openLedgerFor opens the ledger of the queue d (--db db, or d's own file)
// and checks that the two belong together, binding them when o allows. A
// refusal changes nothing: a missing SQLite file is not created, an empty
// one or a PostgreSQL schema is not given the ledger's tables, and another
// SQLite database is not switched to WAL mode.
func openLedgerFor(ctx context.Context, d *queue.Dir, db string, o ledgerOpts) (*ledger.DB, error) {
	if err := refuseKeywordDSN(db); err != nil {
		return nil, err // before it is taken for a missing SQLite file
	}
	dir := d.Path()
	where := db
	// A writer of a queue with history, unless told --new-ledger, needs the
	// ledger that recorded it: it must not create one, an empty SQLite
	// file or a PostgreSQL schema without tables.
	history := false
	if o.use == writeLedger && !o.newLedger {
		has, err := d.HasHistory()
		if err != nil {
			return nil, err
		}
		history = has
	}
	if path, ok := sqliteFile(dir, db); ok {
		where = path
		fi, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist) || err == nil && fi.Mode().IsRegular() && fi.Size() == 0:
			state := "does not exist"
			if err == nil {
				state = "is an empty file"
			}
			if o.use == readLedger {
				return nil, refuse(nil, "ledger %s %s (is --db right? spool init %s creates a queue's ledger)", path, state, dir)
			}
			if history {
				return nil, refuse(ledger.ErrNewLedger, "ledger %s %s, but %s holds messages in done/ or error/ that it recorded; consuming would process their redeliveries again. %s",
					path, state, dir, repairHint(dir))
			}
		case err == nil && (o.use == readLedger || history):
			// Opening a ledger switches the file to WAL mode, a change
			// that stays even when the open then finds no ledger in it:
			// a mistyped --db that names another SQLite database must
			// leave that database as it was.
			if isLedger, err := sqlite.HoldsLedger(ctx, path); err != nil {
				return nil, err
			} else if !isLedger {
				return nil, noLedger(nil, where, dir, o)
			}
		}
	}
	opened := o
	if history {
		opened.use = readLedger // opens an existing ledger only (still migrated)
	}
	l, err := openLedgerWith(ctx, dir, db, opened)
	if err != nil {
		if errors.Is(err, ledger.ErrNoLedger) {
			return nil, noLedger(err, where, dir, o)
		}
		return nil, err
	}
	mode := ledger.BindCheck
	switch {
	case o.use == writeLedger && o.newLedger:
		mode = ledger.BindNew
	case o.use == writeLedger:
		mode = ledger.BindWrite
	}
	if _, err := ledger.Bind(ctx, l, d, mode); err != nil {
		_ = l.Close() // the error that matters is the refusal
		return nil, bindError(err, where, dir)
	}
	return l, nil
}

// noLedger is the refusal of a database that holds no ledger: a report's,
// or a writer's of a queue with history.
func noLedger(err error, where, dir string, o ledgerOpts) error {
	if o.use == writeLedger {
		return refuse(ledger.ErrNewLedger, "%s holds no spool ledger, but %s holds messages in done/ or error/ that one recorded; consuming would process their redeliveries again. %s",
			where, dir, repairHint(dir))
	}
	return refuse(err, "%s holds no spool ledger (is --db right? spool init %s creates a queue's ledger)", where, dir)
}

// bindError turns a refusal of ledger.Bind into one line that says what is
// wrong and what to run.
func bindError(err error, where, dir string) error {
	switch {
	case errors.Is(err, ledger.ErrOtherQueue):
		return refuse(err, "ledger %s: %v. Try: give each queue its own ledger (--db), or on PostgreSQL its own schema (?search_path=NAME)", where, err)
	case errors.Is(err, ledger.ErrNewLedger):
		return refuse(err, "ledger %s: %v; consuming would process their redeliveries again. %s", where, err, repairHint(dir))
	case errors.Is(err, ledger.ErrRebuilding):
		return refuse(err, "ledger %s: %v; using it now would process redeliveries of the files not yet recorded again. Try: wait for spool fsck %s --repair to finish, or run it again if it was killed", where, err, dir)
	case errors.Is(err, ledger.ErrNoQueueID):
		return refuse(err, "ledger %s: %v. Try: if %s is that queue, spool fsck %s --repair puts its %s back", where, err, dir, dir, queue.IDFile)
	case errors.Is(err, queue.ErrBadID):
		return badIDError(err, dir)
	}
	return err
}

// openBound opens the queue at dir and its ledger for a command that reads
// both; done closes them, keeping the first error in *err.
func openBound(ctx context.Context, dir, db string, o ledgerOpts) (d *queue.Dir, l *ledger.DB, done func(err *error), err error) {
	if d, err = openQueue(dir); err != nil {
		return nil, nil, nil, err
	}
	if l, err = openLedgerFor(ctx, d, db, o); err != nil {
		_ = d.Close() // the error that matters is the ledger's
		return nil, nil, nil, err
	}
	return d, l, func(err *error) {
		closeLedger(l, err)
		closeQueue(d, err)
	}, nil
}

// badIDError is the refusal of a queue.id that holds no identity.
func badIDError(err error, dir string) error {
	return refuse(err, "%v. Try: if the ledger is this queue's, remove %s/%s and run spool fsck %s --repair, which writes the ledger's identity back",
		err, dir, queue.IDFile, dir)
}
