package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

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
	if rowID < 0 {
		return fmt.Sprintf("%s-%020d", queueID, rowID) // never a row's: ids count from 1
	}
	// One allocation, where Sprintf's formatting costs a relay's every
	// event several.
	b := make([]byte, 0, len(queueID)+21)
	b = append(append(b, queueID...), '-')
	var d [20]byte
	digits := strconv.AppendInt(d[:0], rowID, 10)
	for range 20 - len(digits) {
		b = append(b, '0')
	}
	return string(append(b, digits...))
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
// send, off the sending goroutine. It is byte for byte what
// json.Marshal makes of the envelope (HTML-escaped strings, a compacted
// payload, headers in key order), so that a consumer's dedup or a
// signature over the document never sees two forms of one event.
func (e *Event) Body() ([]byte, error) {
	if e.body != nil {
		return e.body, nil
	}
	env := envelope{
		MsgID: e.ID, Aggregate: e.Row.Aggregate, Type: e.Row.Type, Payload: json.RawMessage(e.Row.Payload),
		Headers: e.Headers(), OutboxID: e.Row.ID,
		CreatedAt: e.Row.CreatedAt.UTC().Format(ledger.TimeLayout), CausedBy: e.Row.MsgID,
	}
	b, ok := appendEnvelope(make([]byte, 0, 160+len(e.ID)+len(e.Row.Payload)), &env)
	if !ok {
		var err error
		if b, err = marshalEnvelope(e.ID, &env); err != nil {
			return nil, err
		}
	}
	e.body = b
	return b, nil
}

// marshalEnvelope is json.Marshal's document for env, a payload that is
// not JSON going as a JSON string: Body's rule, for the documents
// appendEnvelope leaves to it.
func marshalEnvelope(id string, env *envelope) ([]byte, error) {
	// Marshal checks a RawMessage itself: a payload that is not JSON fails
	// it, and goes as a string instead (one scan of a valid payload, not
	// two).
	payload := []byte(env.Payload)
	var b []byte
	var err error
	if len(payload) > 0 {
		b, err = json.Marshal(env)
	}
	if len(payload) == 0 || err != nil && !json.Valid(payload) {
		if env.Payload, err = json.Marshal(string(payload)); err != nil {
			return nil, fmt.Errorf("event %s: payload: %w", id, err)
		}
		b, err = json.Marshal(env)
	}
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", id, err)
	}
	return b, nil
}

// appendEnvelope appends json.Marshal's document for env to b, without
// reflection, when every string of it is printable ASCII that JSON
// quotes as it is and its payload is JSON with nothing json.Marshal
// would escape (<, >, &, U+2028, U+2029): the documents of nearly every
// event. Otherwise it reports false, and marshalEnvelope makes the
// document.
func appendEnvelope(b []byte, env *envelope) ([]byte, bool) {
	if len(env.Payload) == 0 || !plainJSON(env.Payload) || !plain(env.MsgID) || !plain(env.Aggregate) ||
		!plain(env.Type) || !plain(env.CreatedAt) || !plain(env.CausedBy) {
		return b, false
	}
	for k, v := range env.Headers {
		if !plain(k) || !plain(v) {
			return b, false
		}
	}
	b = append(b, `{"msg_id":"`...)
	b = append(b, env.MsgID...)
	b = append(b, `","aggregate":"`...)
	b = append(b, env.Aggregate...)
	b = append(b, `","type":"`...)
	b = append(b, env.Type...)
	b = append(b, `","payload":`...)
	buf := bytes.NewBuffer(b)
	if json.Compact(buf, env.Payload) != nil {
		return b, false // not JSON: a string, marshalEnvelope's
	}
	b = buf.Bytes()
	if len(env.Headers) > 0 {
		b = append(b, `,"headers":{`...)
		for i, k := range slices.Sorted(maps.Keys(env.Headers)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, k...)
			b = append(b, `":"`...)
			b = append(b, env.Headers[k]...)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, `,"outbox_id":`...)
	b = strconv.AppendInt(b, env.OutboxID, 10)
	b = append(b, `,"created_at":"`...)
	b = append(b, env.CreatedAt...)
	b = append(b, '"')
	if env.CausedBy != "" {
		b = append(b, `,"caused_by":"`...)
		b = append(b, env.CausedBy...)
		b = append(b, '"')
	}
	return append(b, '}'), true
}

// plain reports whether json.Marshal quotes s as it is: printable ASCII
// without a quote, a backslash, or what it escapes for HTML.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// plainJSON reports whether json.Marshal's compaction of the JSON text p
// would escape nothing: p has no <, > or &, and no byte of U+2028 or
// U+2029 (their UTF-8 begins with 0xE2), which it escapes.
func plainJSON(p []byte) bool {
	for _, c := range p {
		if c == '<' || c == '>' || c == '&' || c == 0xe2 {
			return false
		}
	}
	return true
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
