package main

import (
	"os"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
)

// An operator action that changes the queue or the ledger is audited
// (docs/DESIGN.md, "Audit"), as a task.Action: its row is written as
// started before the action changes anything, and ended with how it
// ended; a command that cannot write the row does not act. The library
// does it (queueopen.RunAudited, and its own audited actions); here is
// who acts on the command line. Replays and discards are audited by
// package task's Service alone.

// cliEntry is the audit row of action on the command line: the OS user,
// this process.
func cliEntry(action string) ledger.AuditEntry {
	return ledger.AuditEntry{Actor: osUser(), Via: ledger.AuditCLI, Action: action, Host: queue.Host(), PID: os.Getpid()}
}

// cliAudit is the entry Bind audits a first bind with.
func cliAudit() ledger.AuditEntry { return cliEntry(ledger.AuditBind) }

// cliAudited is who acts on the command line for the library's audited
// actions (queueopen.Audited): the OS user, this process, the command's
// name; a failure to end the row of an action that failed is warned of.
func cliAudited(e *env) queueopen.Audited {
	return queueopen.Audited{Who: cliEntry(""), By: e.Cmd.Name, Warn: func(err error) { e.Warn("%v", err) }}
}

// Audit actions of the commands (ledger.AuditBind and
// ledger.AuditNewLedger are Bind's).
const (
	auditBackup = "backup"
)
