package relay

import (
	"encoding/json"
	"fmt"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
)

// Event is one outbox row on its way to a target.
type Event struct {
	// ID is the event's id: stable across every send of the row, unique
	// across queues (see EventID). Targets send it as the dedup key.
	ID string
	// Row is the outbox row the event is.
	Row ledger.OutboxRow

	body []byte // Body's, once made
}

// EventID is the id of row rowID of the outbox of the queue whose
// identity is queueID: the identity, a dash and the row id in 20 digits,
// so that the ids of one queue sort as their rows do, as text too.
func EventID(queueID string, rowID int64) string {
	return fmt.Sprintf("%s-%020d", queueID, rowID)
}

// envelope is the JSON document every target is sent for an event.
type envelope struct {
	MsgID     string            `json:"msg_id"`
	Aggregate string            `json:"aggregate"`
	Type      string            `json:"type"`
	Payload   json.RawMessage   `json:"payload"`
	Headers   map[string]string `json:"headers,omitempty"`
	OutboxID  int64             `json:"outbox_id"`
	CreatedAt string            `json:"created_at"`
	// CausedBy is the msg_id of the message whose handler emitted it.
	CausedBy string `json:"caused_by,omitempty"`
}

// Body is the JSON document sent for e: msg_id (e.ID), aggregate, type,
// payload (the row's payload as JSON when it is valid JSON, else as a
// JSON string), headers, outbox_id, created_at and caused_by (the
// msg_id that caused it, when known).
//
// The document is made once and kept: the relay makes it ahead of the
// send, off the sending goroutine.
func (e *Event) Body() ([]byte, error) {
	if e.body != nil {
		return e.body, nil
	}
	env := envelope{
		MsgID: e.ID, Aggregate: e.Row.Aggregate, Type: e.Row.Type, Payload: json.RawMessage(e.Row.Payload),
		Headers: e.Headers(), OutboxID: e.Row.ID,
		CreatedAt: e.Row.CreatedAt.UTC().Format(ledger.TimeLayout), CausedBy: e.Row.MsgID,
	}
	// Marshal checks a RawMessage itself: a payload that is not JSON fails
	// it, and goes as a string instead (one scan of a valid payload, not
	// two).
	var b []byte
	var err error
	if len(e.Row.Payload) > 0 {
		b, err = json.Marshal(env)
	}
	if len(e.Row.Payload) == 0 || err != nil && !json.Valid(e.Row.Payload) {
		if env.Payload, err = json.Marshal(string(e.Row.Payload)); err != nil {
			return nil, fmt.Errorf("event %s: payload: %w", e.ID, err)
		}
		b, err = json.Marshal(env)
	}
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", e.ID, err)
	}
	e.body = b
	return b, nil
}

// The headers the relay adds to an event from the message that caused it.
const (
	// HeaderTraceparent continues the message's W3C trace context.
	HeaderTraceparent = "traceparent"
	// HeaderTenant carries the message's tenant.
	HeaderTenant = "Spool-Tenant"
	// HeaderSchemaVersion carries the message's schema version.
	HeaderSchemaVersion = "Spool-Schema-Version"
)

// Headers are the headers sent with e: the row's own, and from the
// message that caused it (Row.Cause) those the row does not set itself:
// traceparent, the message's trace continued (the same trace-id and
// flags, a new parent-id derived from the event's id, so that every send
// of the event carries the same span), Spool-Tenant and
// Spool-Schema-Version. nil when there are none.
func (e *Event) Headers() map[string]string {
	c := e.Row.Cause
	if c.IsZero() {
		return e.Row.Headers
	}
	h := make(map[string]string, len(e.Row.Headers)+3)
	if c.Trace != "" {
		// Parse checked it before the ledger recorded it; a row edited by
		// hand into something else is not continued.
		if tc, err := spool.ParseTraceparent(c.Trace); err == nil {
			h[HeaderTraceparent] = tc.Child(e.ID).String()
		}
	}
	if c.Tenant != "" {
		h[HeaderTenant] = c.Tenant
	}
	if c.Version != "" {
		h[HeaderSchemaVersion] = c.Version
	}
	for k, v := range e.Row.Headers {
		h[k] = v
	}
	return h
}
