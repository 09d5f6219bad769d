package spool

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Event is one event a Handler emits into the ledger's outbox (Emit), for
// spool relay to deliver: the outbox row's aggregate, type, payload and
// headers (docs/DESIGN.md, "The outbox").
type Event struct {
	// Aggregate is what the event is about (an order number): the relay
	// delivers the events of one aggregate in the order they were
	// emitted. Required: UTF-8 text of at most MaxKeyLen bytes without
	// control characters, as it is a key of the outbox's indexes and
	// travels as a header (Spool-Aggregate).
	Aggregate string
	// Type names the kind of event ("payment"). Required: UTF-8 text of
	// at most 255 bytes without control characters, as it travels as a
	// header too (Spool-Type, and AMQP's type property, a short string).
	Type string
	// Payload is the event's body, as text (JSON, by convention).
	Payload []byte
	// Headers are carried with the event to its target (NATS headers,
	// AMQP headers, HTTP headers); nil for none.
	Headers map[string]string
}

// Emitter inserts e into the outbox in tx, msgID being the message that
// caused it ("" for none). A Ledger with an outbox gives its Emitter
// to a Handler as the Outbox of the delivery it hands it; Emit uses it.
type Emitter func(ctx context.Context, tx *sql.Tx, msgID string, e Event) error

// ErrNoEmitter is returned by Emit when d has no Outbox: d is not the
// delivery a ledger with an outbox gave the Handler calling Emit (or it
// is nil).
var ErrNoEmitter = errors.New("no outbox for this delivery: call Emit with the transaction and delivery a Handler was given")

// Emit writes e into the outbox of the ledger, in tx, through d.Outbox:
// tx and d are the transaction and delivery a Handler was given, and the
// event commits with d's processed row or not at all; d's msg_id is
// recorded as the event's cause. An error is the insert's: returned from
// the Handler, it fails the message like any other write.
func Emit(ctx context.Context, tx *sql.Tx, d *Delivery, e Event) error {
	if d == nil || d.Outbox == nil {
		return ErrNoEmitter
	}
	em := d.Outbox
	if e.Aggregate == "" || e.Type == "" {
		return Permanent(errors.New("emit: an event needs an aggregate and a type"))
	}
	// Refused here rather than by the insert, as permanent: the same
	// event would fail the same way on every attempt, and a key too long
	// for an index fails the statement on PostgreSQL.
	if err := checkLabel("aggregate", e.Aggregate, MaxKeyLen); err != nil {
		return err
	}
	if err := checkLabel("type", e.Type, maxEventType); err != nil {
		return err
	}
	msgID := ""
	if d.Message != nil {
		msgID = d.Message.MsgID
	}
	return em(ctx, tx, msgID, e)
}

// maxEventType is the longest event type, in bytes: AMQP carries it in
// its type property, a short string.
const maxEventType = 255

// checkLabel refuses an event's aggregate or type (what) that is not UTF-8
// text of at most limit bytes without control characters.
func checkLabel(what, v string, limit int) error {
	switch {
	case len(v) > limit:
		return Permanent(fmt.Errorf("emit: %s of %d bytes, over the limit of %d", what, len(v), limit))
	case !utf8.ValidString(v):
		return Permanent(fmt.Errorf("emit: %s %q is not valid UTF-8", what, clipTo([]byte(v), maxShown)))
	case strings.ContainsFunc(v, isControl):
		return Permanent(fmt.Errorf("emit: %s %q holds a control character", what, clipTo([]byte(v), maxShown)))
	}
	return nil
}
