package queueopen

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// RefusalError is a refusal worded for an operator, one line that says
// what is wrong and what to run: a ledger missing, empty or another
// queue's (LedgerError.Explain), a queue.id that holds no identity, a
// backup refused. It is configuration (spool exits 2), and wraps its
// cause (a ledger.Bind sentinel, when there is one).
type RefusalError struct {
	Msg string
	Err error
}

func (e *RefusalError) Error() string { return e.Msg }
func (e *RefusalError) Unwrap() error { return e.Err }

// Refuse returns a *RefusalError of cause, its line formatted.
func Refuse(cause error, format string, args ...any) error {
	return &RefusalError{Msg: fmt.Sprintf(format, args...), Err: cause}
}

// Explain words le, Attach's refusal for the queue at dir with --db db
// (empty for the queue's own file), as a *RefusalError that says what to
// run: a wrong --db is asked about before a lost ledger, which spool fsck
// --repair rebuilds; a refusal it has no words for is le itself.
func (le *LedgerError) Explain(dir, db string) error {
	lost := errors.Is(le.Err, ledger.ErrNewLedger)
	what := "ledger " + le.Ledger + " " + le.Found.String()
	if le.Found == NotLedger {
		what = le.Ledger + " " + le.Found.String()
	}
	switch {
	case le.Found != NoFile && le.Found != EmptyFile && le.Found != NotLedger:
	case lost && db != "":
		// An explicit --db that holds nothing on a queue with history is
		// more likely a wrong --db than a lost ledger: ask that first, as
		// the reports do.
		return Refuse(le, "%s (is --db right?), and %s holds messages in done/ or error/ that a ledger recorded; consuming with this one would process their redeliveries again. %s",
			what, dir, wrongDBHint(dir, db))
	case lost:
		return Refuse(le, "%s, but %s holds messages in done/ or error/ that it recorded; consuming would process their redeliveries again. %s",
			what, dir, repairHint(dir, db))
	default:
		return Refuse(le, "%s (is --db right? spool init %s creates a queue's ledger)", what, dir)
	}
	return bindError(le, le.Err, le.Ledger, dir, db)
}

// bindError turns a refusal of ledger.Bind (cause, within le) into one
// line that says what is wrong and what to run; db is --db as given.
func bindError(le *LedgerError, cause error, where, dir, db string) error {
	switch {
	case errors.Is(cause, ledger.ErrOtherQueue):
		return Refuse(le, "ledger %s: %v. Try: give each queue its own ledger (--db), or on PostgreSQL its own schema (?search_path=NAME)", where, cause)
	case errors.Is(cause, ledger.ErrNewLedger):
		return Refuse(le, "ledger %s: %v; consuming would process their redeliveries again. %s", where, cause, repairHint(dir, db))
	case errors.Is(cause, ledger.ErrRebuilding):
		return Refuse(le, "ledger %s: %v; using it now would process redeliveries of the files not yet recorded again. Try: wait for %s --repair to finish, or run it again if it was killed", where, cause, FsckLine(dir, db))
	case errors.Is(cause, ledger.ErrNoQueueID):
		return Refuse(le, "ledger %s: %v. Try: if %s is that queue, %s --repair puts its %s back", where, cause, dir, FsckLine(dir, db), queue.IDFile)
	case errors.Is(cause, queue.ErrBadID):
		return BadIDError(cause, dir, db)
	}
	return le
}

// BadIDError is the refusal of a queue.id that holds no identity; db is
// --db as given.
func BadIDError(err error, dir, db string) error {
	return Refuse(err, "%v. Try: if the ledger is this queue's, remove %s/%s and run %s --repair, which writes the ledger's identity back",
		err, dir, queue.IDFile, FsckLine(dir, db))
}

// repairHint is what to run when the ledger of the queue at dir lost its
// records; db is --db as given, empty for the queue's own file.
func repairHint(dir, db string) string {
	return "Try: " + FsckLine(dir, db) + " --repair to rebuild the ledger from the directories, " +
		"or --new-ledger to start an empty one on purpose (redeliveries of old messages are then processed again)"
}

// wrongDBHint is what to run when --db db names no ledger, or an empty
// one, for a queue at dir with history: most likely --db is wrong, and a
// repair would build a second ledger beside the queue's own.
func wrongDBHint(dir, db string) string {
	return "Try: fix --db; only if it is right, " + FsckLine(dir, db) + " --repair rebuilds the ledger there from the directories, " +
		"or --new-ledger starts an empty one on purpose (redeliveries of old messages are then processed again)"
}

// FsckLine is the spool fsck command line for the queue at dir with
// --db db (none when db is empty), its arguments quoted for a shell.
func FsckLine(dir, db string) string {
	c := "spool fsck " + ShellWord(dir)
	if db != "" {
		c += " --db " + ShellWord(db)
	}
	return c
}

// ShellWord is s as one word of a POSIX shell command line: as it is when
// it holds nothing the shell treats specially, else in single quotes.
func ShellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
