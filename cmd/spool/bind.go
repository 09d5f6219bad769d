package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

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
// records; db is --db as given, empty for the queue's own file.
func repairHint(dir, db string) string {
	return "Try: " + fsckLine(dir, db) + " --repair to rebuild the ledger from the directories, " +
		"or --new-ledger to start an empty one on purpose (redeliveries of old messages are then processed again)"
}

// wrongDBHint is what to run when --db db names no ledger, or an empty
// one, for a queue at dir with history: most likely --db is wrong, and a
// repair would build a second ledger beside the queue's own.
func wrongDBHint(dir, db string) string {
	return "Try: fix --db; only if it is right, " + fsckLine(dir, db) + " --repair rebuilds the ledger there from the directories, " +
		"or --new-ledger starts an empty one on purpose (redeliveries of old messages are then processed again)"
}

// fsckLine is the spool fsck command line for the queue at dir with
// --db db (none when db is empty), its arguments quoted for a shell.
func fsckLine(dir, db string) string {
	c := "spool fsck " + shellWord(dir)
	if db != "" {
		c += " --db " + shellWord(db)
	}
	return c
}

// shellWord is s as one word of a POSIX shell command line: as it is when
// it holds nothing the shell treats specially, else in single quotes.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
	what := "ledger " + le.Ledger + " " + le.Found.String()
	if le.Found == queueopen.NotLedger {
		what = le.Ledger + " " + le.Found.String()
	}
	switch {
	case le.Found != queueopen.NoFile && le.Found != queueopen.EmptyFile && le.Found != queueopen.NotLedger:
	case lost && db != "":
		// An explicit --db that holds nothing on a queue with history is
		// more likely a wrong --db than a lost ledger: ask that first, as
		// the reports do.
		return refuse(le, "%s (is --db right?), and %s holds messages in done/ or error/ that a ledger recorded; consuming with this one would process their redeliveries again. %s",
			what, dir, wrongDBHint(dir, db))
	case lost:
		return refuse(le, "%s, but %s holds messages in done/ or error/ that it recorded; consuming would process their redeliveries again. %s",
			what, dir, repairHint(dir, db))
	default:
		return refuse(le, "%s (is --db right? spool init %s creates a queue's ledger)", what, dir)
	}
	return bindError(le, le.Err, le.Ledger, dir, db)
}

// bindError turns a refusal of ledger.Bind (cause, within le) into one
// line that says what is wrong and what to run; db is --db as given.
func bindError(le *queueopen.LedgerError, cause error, where, dir, db string) error {
	switch {
	case errors.Is(cause, ledger.ErrOtherQueue):
		return refuse(le, "ledger %s: %v. Try: give each queue its own ledger (--db), or on PostgreSQL its own schema (?search_path=NAME)", where, cause)
	case errors.Is(cause, ledger.ErrNewLedger):
		return refuse(le, "ledger %s: %v; consuming would process their redeliveries again. %s", where, cause, repairHint(dir, db))
	case errors.Is(cause, ledger.ErrRebuilding):
		return refuse(le, "ledger %s: %v; using it now would process redeliveries of the files not yet recorded again. Try: wait for %s --repair to finish, or run it again if it was killed", where, cause, fsckLine(dir, db))
	case errors.Is(cause, ledger.ErrNoQueueID):
		return refuse(le, "ledger %s: %v. Try: if %s is that queue, %s --repair puts its %s back", where, cause, dir, fsckLine(dir, db), queue.IDFile)
	case errors.Is(cause, queue.ErrBadID):
		return badIDError(cause, dir, db)
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

// badIDError is the refusal of a queue.id that holds no identity; db is
// --db as given.
func badIDError(err error, dir, db string) error {
	return refuse(err, "%v. Try: if the ledger is this queue's, remove %s/%s and run %s --repair, which writes the ledger's identity back",
		err, dir, queue.IDFile, fsckLine(dir, db))
}
