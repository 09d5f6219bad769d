package spool

import (
	"context"
	"database/sql"
	"errors"
)

// Event is one event a Handler emits into the ledger's outbox (Emit), for
// spool relay to deliver: the outbox row's aggregate, type, payload and
// headers (docs/DESIGN.md, "The outbox").
type Event struct {
	// Aggregate is what the event is about (an order number): the relay
	// delivers the events of one aggregate in the order they were
	// emitted. Required.
	Aggregate string
	// Type names the kind of event ("payment"). Required.
	Type string
	// Payload is the event's body, as text (JSON, by convention).
	Payload []byte
	// Headers are carried with the event to its target (NATS headers,
	// AMQP headers, HTTP headers); nil for none.
	Headers map[string]string
}

// Emitter inserts e into the outbox in tx, msgID being the message that
// caused it ("" for none). A WorkLedger with an outbox places its Emitter
// in the context it gives a Handler (WithEmitter); Emit uses it.
type Emitter func(ctx context.Context, tx *sql.Tx, msgID string, e Event) error

type emitterKey struct{}

// WithEmitter returns ctx carrying em, for the handlers called with it.
func WithEmitter(ctx context.Context, em Emitter) context.Context {
	return context.WithValue(ctx, emitterKey{}, em)
}

// ErrNoOutbox is returned by Emit when ctx carries no Emitter: it was not
// given by a ledger with an outbox to the Handler calling Emit.
var ErrNoOutbox = errors.New("no outbox in this context: call Emit with the context and transaction a Handler was given")

// Emit writes e into the outbox of the ledger, in tx, the transaction a
// Handler was given with ctx: the event commits with d's processed row or
// not at all. d is the delivery being handled (its msg_id is recorded as
// the event's cause), or nil. An error is the insert's: returned from the
// Handler, it fails the message like any other write.
func Emit(ctx context.Context, tx *sql.Tx, d *Delivery, e Event) error {
	em, _ := ctx.Value(emitterKey{}).(Emitter)
	if em == nil {
		return ErrNoOutbox
	}
	if e.Aggregate == "" || e.Type == "" {
		return Permanent(errors.New("emit: an event needs an aggregate and a type"))
	}
	msgID := ""
	if d != nil && d.Message != nil {
		msgID = d.Message.MsgID
	}
	return em(ctx, tx, msgID, e)
}
