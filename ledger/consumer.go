package ledger

import "github.com/spoolq/spool"

// Consumer is the ledger as the consumer sees it: the spool.Ledger that
// spool.NewConsumer is given, whose methods record deliveries, reserve
// msg_ids for calls, keep the sessions' leases, read the operator's pause
// and holds, and keep batch files' progress (the contract of each is on
// spool.Ledger's). It shares its DB's connections, and its fence on the
// writes of a session whose lease another consumer took over (lease.go),
// with every other Consumer of that DB. Closing the DB ends it; the
// consumer never closes its ledger.
type Consumer struct{ db *DB }

// Consumer returns the ledger as the consumer sees it.
func (db *DB) Consumer() Consumer { return Consumer{db} }

var _ spool.Ledger = Consumer{}
