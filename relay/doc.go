// Package relay delivers the events of a ledger's outbox (migration 008,
// spool.Emit, a --sql INSERT INTO outbox) to a target: another spool
// queue, an HTTP endpoint, a NATS JetStream stream or a RabbitMQ exchange
// or queue (spool relay).
//
// Delivery is at least once. An event's id is stable and unique (the
// queue's identity and the row's id, ID), and every target is sent it as
// the receiver's dedup key. An event counts as published when the target
// acknowledged it (the rename into the other queue's inbox/, the 2xx, the
// JetStream ack, the broker's publisher confirm); the row's published_at
// is written after that, so a relay that dies in between sends the event
// again, and the receiver's dedup absorbs the repeat.
//
// Events of one aggregate are published in id order, one at a time, and a
// later one only once the earlier was acknowledged (or parked under the
// PolicySkip policy); a relay publishes an aggregate only while it holds
// the aggregate's lease in the ledger, so that several relays at once do
// not interleave one aggregate's events. Aggregates do not wait for each
// other. docs/DESIGN.md, "The outbox", has the whole contract.
package relay
