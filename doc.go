// Package spool consumes a directory-based message queue with at-least-once
// delivery made effectively exactly-once by an idempotent ledger.
//
// A queue is a directory with four stages on one filesystem:
//
//	inbox/       producers rename finished *.json files in here
//	processing/  claims of running consumers, one subdirectory per consumer
//	done/        processed, or ignored as a duplicate
//	error/       dead letters (poison messages), with their reason in the ledger
//
// The consumer keeps these invariants, whatever the number of consumers and
// whenever one of them is killed:
//
//   - I1: every message that entered inbox/ ends in exactly one of done/ or
//     error/; none lost, none in two places.
//   - I2: the ledger's processed table holds exactly one row per distinct
//     valid msg_id (its PRIMARY KEY absorbs duplicates, not application code).
//   - I3: a file in done/ has its row committed durably: the ledger commit is
//     fsynced before the file leaves processing/.
//   - I4: a file in error/ has a dead-letter record with reason and detail.
//   - I5: after a drain run, processing/ is empty, including the claims a
//     crashed consumer left: on one host they are recovered at once, because
//     the owner's lock on its claim directory dies with it; across hosts,
//     once the owner's lease has expired.
//   - I6: any number of consumers may run at once on one queue.
//   - I7: after kill -9 at any instant, a new run restores I1 to I5 and never
//     reports a message as a duplicate of its own interrupted processing: the
//     ledger remembers each claim's identity (consumer, inode, change time),
//     not just the message's name and content.
//
// docs/DESIGN.md in the repository is the full design: the queue layout,
// the message contract, these invariants and how each is kept, the consume
// protocol, the ledger schema and the command contract.
//
// The root package holds the domain: Message and its exact Amount, the
// Contract that validates raw bytes into a Message, the Reasons a message is
// dead-lettered for, the Ledger interface, and the Consumer that drives the
// protocol. The queue package implements the directory protocol, ledger and
// its backends the storage, and cmd/spool the command line.
//
// Package [github.com/spoolq/spool/handler] has the exec, SQL and HTTP handlers; docs/ARCHITECTURE.md maps the code.
//
// # Examples
//
// The runnable examples, in example_test.go, are shown with what they
// show by pkg.go.dev and `go doc -http`: [Contract.Parse] validates raw
// bytes into a Message or says why it is poison; [Consumer.Drain] runs a
// consumer whose Handler writes through the ledger's transaction; [Caller]
// runs work outside it, called concurrently, one call per msg_id at a
// time; [Permanent] marks what a retry cannot fix; [Retry.Delay] is the
// backoff. Package handler has those of its handlers.
package spool
