package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/spoolq/spool/internal/cmdline"
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
// a refusal as one line that says what to run (LedgerError.Explain), a
// keyword DSN as a usage error, a problem of the --db file as the flag's.
func ledgerFailure(err error, dir, db string) error {
	var le *queueopen.LedgerError
	switch {
	case errors.Is(err, queueopen.ErrKeywordDSN):
		return &cmdline.UsageError{Msg: fmt.Sprintf("--db %q looks like a PostgreSQL keyword/value connection string; give a postgres:// URL", db)}
	case !errors.As(err, &le):
		return nameDBFlag(db, err)
	}
	return le.Explain(dir, db)
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
		queueopen.CloseDir(d, err)
	}, nil
}
