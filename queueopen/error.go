package queueopen

import "fmt"

// Found is what Attach found where the ledger should be, when it refused
// it.
type Found int

const (
	// FoundLedger is a database that holds a ledger (or a file whose
	// problem the backend names).
	FoundLedger Found = iota
	// NoFile: the SQLite file does not exist.
	NoFile
	// EmptyFile: the SQLite file is empty.
	EmptyFile
	// NotLedger: a database that holds no spool ledger.
	NotLedger
	// BindRefused: a ledger, which ledger.Bind refused for this queue.
	BindRefused
)

// String says what was found, as the end of a sentence that begins with
// the ledger's name.
func (f Found) String() string {
	switch f {
	case NoFile:
		return "does not exist"
	case EmptyFile:
		return "is an empty file"
	case NotLedger:
		return "holds no spool ledger"
	case BindRefused:
		return "belongs elsewhere"
	}
	return "is there"
}

// LedgerError is Attach's refusal of a ledger: missing, empty, not a
// ledger, or not this queue's. Nothing was changed. Err says why, and is
// one of:
//
//   - ledger.ErrNoLedger: a reader found no ledger (Found is NoFile,
//     EmptyFile or NotLedger);
//   - ledger.ErrNewLedger: a writer of a queue with history found no
//     ledger (NoFile, EmptyFile, NotLedger), or one with no record of it
//     (BindRefused); consuming would process redeliveries again;
//   - the error of ledger.Bind, wrapping ledger.ErrOtherQueue,
//     ledger.ErrRebuilding (spool fsck --repair is rebuilding it, or was
//     killed doing so), ledger.ErrNoQueueID or queue.ErrBadID (Found is
//     BindRefused).
//
// errors.Is sees through it to those sentinels.
type LedgerError struct {
	// Ledger names the ledger: the SQLite file's path, or Options.DB.
	Ledger string
	// Queue is the queue directory's path.
	Queue string
	// Found is what was found where the ledger should be.
	Found Found
	// Err is the reason, as above.
	Err error
	// cause is the backend's error behind a NotLedger, if any.
	cause error
}

func (e *LedgerError) Error() string {
	switch {
	case e.Found == BindRefused:
		return fmt.Sprintf("ledger %s: %v", e.Ledger, e.Err)
	case e.Found == NotLedger:
		return fmt.Sprintf("%s %s: %v", e.Ledger, e.Found, e.Err)
	}
	return fmt.Sprintf("ledger %s %s: %v", e.Ledger, e.Found, e.Err)
}

// Unwrap returns Err and the backend's error, if any.
func (e *LedgerError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.Err, e.cause}
	}
	return []error{e.Err}
}
