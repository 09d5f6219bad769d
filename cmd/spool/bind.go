package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
)

// ledgerUse says what a command does with its ledger, which decides what
// opening it may create and bind (queueopen.Use; docs/DESIGN.md, "Queue
// identity").
type ledgerUse int

const (
	// readLedger: reports and checks (queueopen.Read).
	readLedger ledgerUse = iota
	// writeLedger: init, consume, replay (queueopen.Write).
	writeLedger
)

// ledgerOpts is how a command opens its ledger.
type ledgerOpts struct {
	use ledgerUse
	// relaxed: SQLite's synchronous=NORMAL (--durability relaxed).
	relaxed bool
	// newLedger: --new-ledger, an empty ledger for a queue with history.
	newLedger bool
	// readOnly: a report's, which reads the ledger without write access.
	readOnly bool
}

// options is o for package queueopen, with the ledger --db names.
func (o ledgerOpts) options(db string) queueopen.Options {
	use := queueopen.Read
	if o.use == writeLedger {
		use = queueopen.Write
	}
	qo := queueopen.Options{DB: db, Use: use, Relaxed: o.relaxed, NewLedger: o.newLedger, ReadOnly: o.readOnly}
	if use != queueopen.Read {
		qo.Audit = cliAudit()
	}
	return qo
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
// and checks that the two belong together, binding them when o allows
// (queueopen.Attach). A refusal changes nothing, and is told in the
// command line's words, with what to run.
func openLedgerFor(ctx context.Context, d *queue.Dir, db string, o ledgerOpts) (*ledger.DB, error) {
	l, err := queueopen.Attach(ctx, d, o.options(db))
	if err != nil {
		return nil, ledgerFailure(err, d.Path(), db)
	}
	return l, nil
}

// ledgerFailure words an error of package queueopen for the command line:
// a refusal as one line that says what to run, a keyword DSN as a usage
// error, a problem of the --db file as the flag's.
func ledgerFailure(err error, dir, db string) error {
	var le *queueopen.LedgerError
	switch {
	case errors.Is(err, queueopen.ErrKeywordDSN):
		return &usageError{msg: fmt.Sprintf("--db %q looks like a PostgreSQL keyword/value connection string; give a postgres:// URL", db)}
	case !errors.As(err, &le):
		return nameDBFlag(db, err)
	}
	lost := errors.Is(le.Err, ledger.ErrNewLedger)
	switch le.Found {
	case queueopen.NoFile, queueopen.EmptyFile:
		if lost {
			return refuse(le, "ledger %s %s, but %s holds messages in done/ or error/ that it recorded; consuming would process their redeliveries again. %s",
				le.Ledger, le.Found, dir, repairHint(dir))
		}
		return refuse(le, "ledger %s %s (is --db right? spool init %s creates a queue's ledger)", le.Ledger, le.Found, dir)
	case queueopen.NotLedger:
		if lost {
			return refuse(le, "%s holds no spool ledger, but %s holds messages in done/ or error/ that one recorded; consuming would process their redeliveries again. %s",
				le.Ledger, dir, repairHint(dir))
		}
		return refuse(le, "%s holds no spool ledger (is --db right? spool init %s creates a queue's ledger)", le.Ledger, dir)
	}
	return bindError(le, le.Err, le.Ledger, dir)
}

// bindError turns a refusal of ledger.Bind (cause, within le) into one
// line that says what is wrong and what to run.
func bindError(le *queueopen.LedgerError, cause error, where, dir string) error {
	switch {
	case errors.Is(cause, ledger.ErrOtherQueue):
		return refuse(le, "ledger %s: %v. Try: give each queue its own ledger (--db), or on PostgreSQL its own schema (?search_path=NAME)", where, cause)
	case errors.Is(cause, ledger.ErrNewLedger):
		return refuse(le, "ledger %s: %v; consuming would process their redeliveries again. %s", where, cause, repairHint(dir))
	case errors.Is(cause, ledger.ErrRebuilding):
		return refuse(le, "ledger %s: %v; using it now would process redeliveries of the files not yet recorded again. Try: wait for spool fsck %s --repair to finish, or run it again if it was killed", where, cause, dir)
	case errors.Is(cause, ledger.ErrNoQueueID):
		return refuse(le, "ledger %s: %v. Try: if %s is that queue, spool fsck %s --repair puts its %s back", where, cause, dir, dir, queue.IDFile)
	case errors.Is(cause, queue.ErrBadID):
		return badIDError(cause, dir)
	}
	return le
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
