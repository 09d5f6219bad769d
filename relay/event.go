package relay

import (
	"encoding/json"
	"fmt"

	"github.com/spoolq/spool/ledger"
)

// Event is one outbox row on its way to a target.
type Event struct {
	// ID is the event's id: stable across every send of the row, unique
	// across queues (see EventID). Targets send it as the dedup key.
	ID string
	// Row is the outbox row the event is.
	Row ledger.OutboxRow
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
func (e *Event) Body() ([]byte, error) {
	payload := json.RawMessage(e.Row.Payload)
	if !json.Valid(e.Row.Payload) {
		b, err := json.Marshal(string(e.Row.Payload))
		if err != nil {
			return nil, fmt.Errorf("event %s: payload: %w", e.ID, err)
		}
		payload = b
	}
	b, err := json.Marshal(envelope{
		MsgID: e.ID, Aggregate: e.Row.Aggregate, Type: e.Row.Type, Payload: payload,
		Headers: e.Row.Headers, OutboxID: e.Row.ID,
		CreatedAt: e.Row.CreatedAt.UTC().Format(ledger.TimeLayout), CausedBy: e.Row.MsgID,
	})
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", e.ID, err)
	}
	return b, nil
}
