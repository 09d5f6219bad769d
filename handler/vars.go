package handler

// Vars are the names of the environment variables the handlers set for
// the programs they run: Exec's for each message, Notifier's for each
// dead letter. They are the message's values, not settings: a program run
// by a handler that itself runs spool must not have them read as flags
// (SPOOL_SEQ as --seq), so the CLI's SPOOL_* flag variables skip these
// names. A handler that sets a new variable lists it here (TestVarsListed).
var Vars = []string{
	"SPOOL_MSG_ID", "SPOOL_ORDER_NO", "SPOOL_SEQ", "SPOOL_AMOUNT", "SPOOL_FILE",
	"SPOOL_QUEUE", consumerVar, callsLockVar,
	"SPOOL_PATH", "SPOOL_ORIGINAL_FILE", "SPOOL_REASON", "SPOOL_DETAIL",
}
