package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/queue"
)

// Dir is the dir://PATH target: another spool queue. Each event becomes
// a file in its inbox/, written as spool enqueue writes one (a hidden temp
// file, fsynced, renamed in without replacing anything, the directory
// fsynced): the rename is the acknowledgement. The file is named after the
// event's id (ID.json), so that the names sort as the outbox rows do.
//
// The file is a message in the receiving queue's contract (UseContract;
// the default contract until then): the event's JSON document
// (Event.Body) with the contract's role fields added where the document
// does not already carry them under those names: the key field is the
// event's id, so a repeat (the same name, kept beside the first with a ~N
// suffix) is a duplicate to the receiving ledger, which processes the
// event once; the ordering key is the aggregate; the sequence is the
// outbox row's id, which grows with the aggregate's events in their order
// (with gaps where other aggregates' events fall); the amount is the
// payload's top-level field of that name, or 0 when the payload has none
// and the contract requires one. The contract's header fields carry the
// event's schema version, trace context and tenant when it has them. An
// event the contract would still refuse (too large, a bad amount in its
// payload) is refused here, permanently, with the contract's reason:
// parked, not dead-lettered over there.
type Dir struct {
	d *queue.Dir
	c spool.Contract
}

// OpenDir opens the queue of a dir:// URL: dir:///abs/path or
// dir://./rel/path. The queue must exist (spool init). Its events are
// written in the default contract until UseContract says otherwise.
func OpenDir(u *url.URL) (*Dir, error) {
	path := u.Host + u.Path
	if u.Opaque != "" {
		path = u.Opaque
	}
	if path == "" {
		return nil, fmt.Errorf("target dir://: %w: want dir://PATH", ErrBadTarget)
	}
	d, err := queue.Open(path)
	if err != nil {
		return nil, fmt.Errorf("target dir://%s: %w", path, err)
	}
	return &Dir{d: d, c: spool.DefaultContract()}, nil
}

// Path is the receiving queue's directory, whose contract (its spool.conf)
// the caller reads for UseContract.
func (t *Dir) Path() string { return t.d.Path() }

// envelopeFields are the fields of every event's document, and whether
// each is always there (headers and caused_by are left out when empty).
var envelopeFields = map[string]bool{
	"msg_id": true, "aggregate": true, "type": true, "payload": true,
	"outbox_id": true, "created_at": true, "headers": false, "caused_by": false,
}

// sameAs are the envelope fields a role may be named after, the document
// then carrying the role's value there already.
var sameAs = map[string]string{"key": "msg_id", "order": "aggregate", "seq": "outbox_id"}

// UseContract makes t write its events in c, the receiving queue's
// contract, after checking that c would take every event: a role or
// header field named after another field of the events, or a required
// field that events do not always carry, is refused with an error
// wrapping ErrBadTarget, and t keeps its contract.
func (t *Dir) UseContract(c spool.Contract) error {
	if err := c.Check(); err != nil {
		return fmt.Errorf("target dir://%s: %w", t.d.Path(), err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("target dir://%s: %w: its contract (spool.conf) %s", t.d.Path(), ErrBadTarget, fmt.Sprintf(format, args...))
	}
	carried := map[string]bool{}
	for f, always := range envelopeFields {
		carried[f] = always
	}
	for _, r := range []struct{ role, name string }{{"key", c.KeyField}, {"order", c.OrderField}, {"seq", c.SeqField}, {"amount", c.AmountField}} {
		if _, ok := envelopeFields[r.name]; ok && sameAs[r.role] != r.name {
			return bad("names its %s field %q, which relayed events carry as something else", r.role, r.name)
		}
		carried[r.name] = true
	}
	for _, h := range []string{c.Headers.Version, c.Headers.Trace, c.Headers.Tenant} {
		if _, ok := envelopeFields[h]; ok && h != "" {
			return bad("names a header field %q, which relayed events carry as something else", h)
		}
	}
	for _, f := range c.Required {
		if !carried[f] {
			return bad("requires field %q, which relayed events do not always carry (they carry %s and the contract's role fields)", f, "msg_id, aggregate, type, payload, outbox_id, created_at")
		}
	}
	t.c = c
	return nil
}

// Publish writes e into the queue's inbox/.
func (t *Dir) Publish(_ context.Context, e *Event) error {
	body, err := t.message(e)
	if err != nil {
		return spool.Permanent(err)
	}
	if _, err := t.d.WriteFile(queue.Inbox, e.ID+".json", body); err != nil {
		return fmt.Errorf("dir %s: %w", t.d.Path(), err)
	}
	return nil
}

// message is e's document in t's contract, checked by the contract's
// own parser.
func (t *Dir) message(e *Event) ([]byte, error) {
	body, err := e.Body()
	if err != nil {
		return nil, err
	}
	var add bytes.Buffer
	field := func(name string, raw []byte) {
		if _, ok := envelopeFields[name]; ok {
			return // the document carries it already, with the same value
		}
		k, _ := json.Marshal(name) // a string always marshals
		add.Write(k)
		add.WriteByte(':')
		add.Write(raw)
		add.WriteByte(',')
	}
	str := func(s string) []byte { b, _ := json.Marshal(s); return b }
	c := t.c
	field(c.KeyField, str(e.ID))
	field(c.OrderField, str(e.Row.Aggregate))
	field(c.SeqField, strconv.AppendInt(nil, e.Row.ID, 10))
	if amount := payloadField(e.Row.Payload, c.AmountField); amount != nil {
		field(c.AmountField, amount)
	} else if slices.Contains(c.Required, c.AmountField) {
		field(c.AmountField, []byte(`"0"`))
	}
	h := e.Headers()
	for _, hf := range []struct{ field, header string }{
		{c.Headers.Version, HeaderSchemaVersion}, {c.Headers.Trace, HeaderTraceparent}, {c.Headers.Tenant, HeaderTenant},
	} {
		if v := h[hf.header]; hf.field != "" && v != "" {
			field(hf.field, str(v))
		}
	}
	msg := make([]byte, 0, len(body)+add.Len())
	msg = append(msg, '{')
	msg = append(msg, add.Bytes()...)
	msg = append(msg, body[1:]...)
	if n := int64(len(msg)); n > c.Limit() {
		return nil, fmt.Errorf("event %s: %d bytes, over the receiving queue's max_size of %d", e.ID, n, c.Limit())
	}
	if _, err := c.Parse(msg); err != nil {
		return nil, fmt.Errorf("event %s: the receiving queue's contract would dead-letter it: %w", e.ID, err)
	}
	return msg, nil
}

// payloadField is the raw JSON of the top-level field name of payload,
// nil when payload is not a JSON object or has no such field (or null).
func payloadField(payload []byte, name string) []byte {
	var obj map[string]json.RawMessage
	if json.Unmarshal(payload, &obj) != nil {
		return nil
	}
	raw, ok := obj[name]
	if !ok || string(raw) == "null" {
		return nil
	}
	return raw
}

// Close closes the queue.
func (t *Dir) Close() error { return t.d.Close() }
