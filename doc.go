// Package spool consumes a directory-based message queue with at-least-once
// delivery made effectively exactly-once by an idempotent ledger.
//
// A queue is a directory with four stages on one filesystem, and a fifth
// an operator sets messages aside in:
//
//	inbox/       producers rename finished *.json files in here, or the
//	             batch files of many records its spool.conf's format takes
//	processing/  claims of running consumers, one subdirectory per consumer
//	done/        processed, or ignored as a duplicate
//	error/       dead letters (poison messages), with their reason in the ledger
//	held/        messages held aside (spool hold) until released
//
// The consumer keeps the invariants I1 to I7, whatever the number of
// consumers and whenever one of them is killed; they are defined in
// docs/DESIGN.md, "Invariants", and the comments of this module cite them
// by number. In short: every message ends in exactly one of done/ or
// error/, its ledger record durable before it leaves processing/.
//
// docs/DESIGN.md in the repository is the full design: the queue layout,
// the message contract, the invariants and how each is kept, the consume
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
// # Embedding
//
// A program consumes a queue with every rule spool consume keeps by
// opening it through [github.com/spoolq/spool/queueopen.Open]: the
// queue's spool.conf is read strictly into its contract, the ledger is
// checked to be the queue's, the contract is held among those of the
// consumers running beside it (another one is refused), and what killed
// runs left is finished. Import the ledger's backend for its
// registration (ledger/sqlite for the queue's own ledger.db):
//
//	q, err := queueopen.Open(ctx, dir, queueopen.Options{Use: queueopen.Consume})
//	if err != nil {
//		return err // a *queueopen.ConfigError, *ContractError or *LedgerError says why
//	}
//	defer q.Close()
//	c, err := q.Consumer(spool.Config{Handler: spool.HandlerFunc(book)})
//	if err != nil {
//		return err
//	}
//	_, err = c.Drain(ctx) // or c.Watch(ctx), until ctx is done
//
// examples/embed is such a program, run beside spool consume by the tests;
// examples/orderbalance adds a business table written in the ledger's
// transaction. NewConsumer alone, on a Dir and a Ledger of the program's
// own, keeps the invariants but none of the queue's configuration.
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
