package relay

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

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

// TestBodyAsMarshal: Body's document is json.Marshal's, byte for byte,
// on the fast path and off it (strings and payloads json.Marshal escapes,
// payloads that are not JSON, headers, a cause).
func TestBodyAsMarshal(t *testing.T) {
	at := time.Date(2026, 12, 6, 4, 5, 6, 789000, time.UTC)
	payloads := []string{`{"a":1}`, " [1, 2,\n3] ", `"s"`, `{"h":"<b>&</b>"}`, "{\"l\":\"\u2028\"}", `{"u":"é"}`, `nope`, ``, `{"a":`, "\xff"}
	strs := []string{"plain", "", `q"uote`, `back\slash`, "<tag>", "a&b", "tab\t", "é", "\u2029", "\xff\xfe"}
	n := 0
	for _, p := range payloads {
		for _, s := range strs {
			for _, hdr := range []map[string]string{nil, {}, {"b": "2", "a": s}, {s: "v"}} {
				n++
				row := ledger.OutboxRow{ID: int64(n), Aggregate: "agg-" + s, Type: s, Payload: []byte(p), Headers: hdr, MsgID: s, CreatedAt: at}
				e := &Event{ID: EventID("q"+s, int64(n)), Row: row}
				got, err := e.Body()
				if err != nil {
					t.Fatalf("payload %q, string %q: %v", p, s, err)
				}
				env := envelope{MsgID: e.ID, Aggregate: row.Aggregate, Type: row.Type, Payload: json.RawMessage(row.Payload),
					Headers: e.Headers(), OutboxID: row.ID, CreatedAt: at.Format(ledger.TimeLayout), CausedBy: row.MsgID}
				want, err := marshalEnvelope(e.ID, &env)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(want) {
					t.Fatalf("payload %q, string %q:\n got %s\nwant %s", p, s, got, want)
				}
			}
		}
	}
	// The fast path was taken: a plain event's document is not json.Marshal's call.
	if _, ok := appendEnvelope(nil, &envelope{MsgID: "q-1", Aggregate: "a", Type: "t", Payload: json.RawMessage(`{"a":1}`), CreatedAt: "x"}); !ok {
		t.Fatal("a plain event left the fast path")
	}
}

// FuzzBodyAsMarshal: any payload and strings, Body's document is
// json.Marshal's.
func FuzzBodyAsMarshal(f *testing.F) {
	f.Add([]byte(`{"a":[1,2.5e3,"x<y"]}`), "A", "k", "v")
	f.Fuzz(func(t *testing.T, payload []byte, agg, k, v string) {
		row := ledger.OutboxRow{ID: 7, Aggregate: agg, Type: "t", Payload: payload, Headers: map[string]string{k: v}}
		e := &Event{ID: "q-7", Row: row}
		got, err := e.Body()
		if err != nil {
			t.Skip(err)
		}
		env := envelope{MsgID: e.ID, Aggregate: agg, Type: "t", Payload: json.RawMessage(payload), Headers: row.Headers,
			OutboxID: 7, CreatedAt: row.CreatedAt.UTC().Format(ledger.TimeLayout)}
		want, err := marshalEnvelope(e.ID, &env)
		if err != nil || string(got) != string(want) {
			t.Fatalf("got %s, want %s (%v)", got, want, err)
		}
	})
}

// TestEventID: the identity, a dash, the row id in 20 digits.
func TestEventID(t *testing.T) {
	for _, id := range []int64{1, 42, 1<<63 - 1, -3} {
		if got, want := EventID("q1", id), fmt.Sprintf("q1-%020d", id); got != want {
			t.Errorf("EventID(q1, %d) = %s, want %s", id, got, want)
		}
	}
}
