package relay

import (
	"encoding/json"
	"testing"

	"github.com/spoolq/spool/ledger"
)

// TestBodyPayload: a payload that is JSON goes as JSON (compacted), any
// other, the empty one included, as a JSON string.
func TestBodyPayload(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`}, {"{\"a\": 1 }\n", `{"a":1}`}, {`not json`, `"not json"`}, {``, `""`}, {`[1,`, `"[1,"`},
	} {
		e := &Event{ID: "q-1", Row: ledger.OutboxRow{ID: 1, Aggregate: "A", Type: "t", Payload: []byte(c.in)}}
		b, err := e.Body()
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		var doc struct{ Payload json.RawMessage }
		if err := json.Unmarshal(b, &doc); err != nil || string(doc.Payload) != c.want {
			t.Errorf("%q: payload %s (%v), want %s", c.in, doc.Payload, err, c.want)
		}
	}
}
