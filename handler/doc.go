// Package handler holds the business handlers spool's command line offers,
// for any Go program to use: Exec runs a shell command per message, Post
// sends it to an HTTP endpoint, SQL runs a file of statements in the
// ledger's transaction. Each is a spool.Handler, given the delivery it works
// on, and says whether a failure is worth a retry: an error marked with
// spool.Permanent is not, any other is. What becomes of a failed message is
// still the consumer's decision (spool.Retry.Decide).
//
// SQL writes through the ledger's transaction, so its effects commit
// together with the message's processed row or not at all. Exec and Post
// act outside the database: after a crash, the messages of an uncommitted
// batch run them again, so their commands and endpoints must be idempotent
// (Post sends the msg_id as an Idempotency-Key), and a batch of one message
// bounds the repeats to one. They never use the transaction they are given,
// which may be nil.
//
// Notifier tells an operator about dead letters, running a command for each
// one from a consumer's OnDelivery hook without ever holding the consumer
// up.
//
// `spool consume --exec`, `--sql`, `--post` and `--on-dead-letter` are these
// handlers, wired from flags; their contract for operators is in `spool
// consume -h` and docs/DESIGN.md.
package handler
