// Package relay delivers the events of a ledger's outbox (migration 008,
// spool.Emit, a --sql INSERT INTO outbox) to a target: another spool
// queue, an HTTP endpoint, a NATS JetStream stream, a RabbitMQ exchange
// or queue, or a Kafka topic (spool relay).
//
// Delivery is at least once. An event's id is stable and unique (the
// queue's identity and the row's id, ID), and every target is sent it as
// the receiver's dedup key. An event counts as published when the target
// acknowledged it (the rename into the other queue's inbox/, the 2xx, the
// JetStream ack, the broker's publisher confirm, Kafka's acks=all); the
// row's published_at is written after that, so a relay that dies in
// between sends the event again, and the receiver's dedup absorbs the
// repeat.
//
// Events of one aggregate are published in id order. To a Pipeline
// (NATS, AMQP, Kafka) many are in flight at once on one ordered stream,
// and their acknowledgements are settled in the aggregate's order: the
// acknowledged prefix is marked published, in batches, and at a failure
// of event k nothing after k is marked before k is: k is retried (or
// parked) and the events after it are sent again after it, which the
// receiver's dedup absorbs. To a plain Target (dir://, http(s)://) one of
// an aggregate is in flight at a time, several aggregates at once. A
// relay publishes an aggregate only while it holds the aggregate's lease
// in the ledger, so that several relays at once do not interleave one
// aggregate's events. Aggregates do not wait for each other.
// docs/DESIGN.md, "The outbox", has the whole contract.
package relay
