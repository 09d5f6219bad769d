package main

import (
	"context"

	"github.com/spoolq/spool/task"
)

// currentOperator is who runs spool (task.CurrentOperator): the passwd
// name of the real uid, or under sudo the user who ran sudo.
func currentOperator() task.Operator { return task.CurrentOperator() }

// osUser names the user running spool for the audit and the ledger's
// records: os:NAME, or uid:N for a uid without a passwd name.
func osUser() string { return currentOperator().Actor() }

// cliIdentity is who acts on the command line for action, with --by by
// ("" when not given), or a refusal (exit 2, audited through s, nothing
// else done): task.Service.OperatorIdentity of the current operator.
func cliIdentity(ctx context.Context, s *task.Service, action string, by string, strict bool) (task.Identity, error) {
	return s.OperatorIdentity(ctx, currentOperator(), action, by, strict)
}
