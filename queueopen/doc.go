// Package queueopen opens a queue together with its ledger and contract,
// the way every program that consumes or inspects a queue must: the
// queue's spool.conf is read strictly (a mistyped key is an error, never a
// default), a consumer's contract is held among those of the consumers
// running beside it (another one is refused), the ledger is found
// where it was asked for, checked to belong to the queue (and bound to it
// when both are new), and, before a consumer claims anything, the replays
// a killed run left unfinished are finished and the temp files of killed
// writers removed.
//
// spool consume, spool replay, the reports, spool fsck and the examples
// all open through it, so an embedder that calls Open gets the same
// guarantees as the command line: a deleted, emptied, mistyped or other
// queue's ledger is refused instead of quietly processing old messages
// again (docs/DESIGN.md, "Queue identity"), a refusal changes nothing in
// the queue or the database, and no replayed file is consumed while its
// replay is unrecorded (docs/DESIGN.md, "Replay").
//
// The package opens ledgers through ledger.Open and imports no backend:
// the program imports the ones it needs (ledger/sqlite for a file path,
// ledger/postgres for a postgres:// URL), for their registration alone.
// It never prints: what it did is reported through Options' callbacks,
// and its refusals are *LedgerError values, which Explain words for an
// operator with what to run.
//
// RunConsumer is spool consume in one call: Open's guarantees, then the
// handler, the batch format (spool.conf's, or the run's FormatOverride
// where spool.conf sets none), the dedup window, the notifications, the
// endpoints, systemd and the signals, in the order that decides which of
// several mistakes a run reports; the program parses its flags into
// ConsumeOptions, has them checked (ConsumeOptions.Check, CheckWork) and
// prints what comes back; Settings says what a run runs with and where
// each value came from.
//
// It also builds what every face of a queue (the command line, serve's
// API and console) works through: Init, the spool.conf text of a new
// queue (ConfigText, NewConfigText), and the queue's task and hold
// services (TaskService, HoldService); and the operator's actions that
// are queue rules rather than a face's: CheckQueue, Fsck, Prune, Flush
// (audited as Audited says), ReadPolicy and ChangePolicy, CopyMessages.
package queueopen
