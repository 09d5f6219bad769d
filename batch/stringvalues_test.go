package batch

import (
	"bytes"
	"testing"
)

// testValues are the rules of a contract whose seq and amount fields are
// optional.
var testValues = stringValues{seq: "seq", optional: map[string]bool{"seq": true, "amount": true}}

// TestStringValuesCompact checks that the fast path gives, byte for byte,
// what the json.Decoder path gives, or declines: the record's content
// hash is taken from these bytes.
func TestStringValuesCompact(t *testing.T) {
	sv := testValues
	objs := []string{
		`{}`, `{"seq":"17"}`, `{"a":"1","seq":"17","b":"x"}`, `{"seq":"017"}`, `{"seq":"-3"}`,
		`{"seq":"0"}`, `{"seq":"1.0"}`, `{"seq":"x"}`, `{"seq":""}`, `{"seq":17}`, `{"seq":"17","seq":"18"}`,
		`{"se\u0071":"17"}`, `{"a<b":"1","seq":"2"}`, `{ "seq":"17"}`, `{"seq": "17"}`, `{"seq":"17" }`,
		`{"seq":"17"} `, `{"o":{"seq":"1", "x":[1, 2]},"seq":"5"}`, `{"seq":"1"`, `{"seq"}`, `[1]`, ``,
		`{"seq":"\u0031"}`, `{"é":"1","seq":"9"}`, `{"seq":"99999999999999999999999"}`, `{"seq":null}`,
		`{"amount":""}`, `{"amount":"","o":{"amount":""},"seq":"","x":""}`, `{"amount":" "}`, `{"amount": ""}`, `{"amount":"\u0000"}`,
	}
	for _, o := range objs {
		want := sv.applySplit([]byte(o))
		got := sv.apply([]byte(o))
		if !bytes.Equal(got, want) {
			t.Errorf("apply(%s) = %s, want %s", o, got, want)
		}
		if fast, ok := sv.applyCompact([]byte(o)); ok && !bytes.Equal(fast, want) {
			t.Errorf("applyCompact(%s) = %s, want %s", o, fast, want)
		}
	}
	if _, ok := sv.applyCompact([]byte(`{"a":"1","seq":"17"}`)); !ok {
		t.Error("applyCompact declined a compact object")
	}
}

// FuzzStringValues checks the fast path against the json.Decoder path on
// any object.
func FuzzStringValues(f *testing.F) {
	f.Add([]byte(`{"a":"1","seq":"17"}`))
	f.Add([]byte(`{"seq":"-3","o":{"seq":"1"}}`))
	f.Add([]byte(`{"amount":"","o":{"amount":""},"x":""}`))
	f.Fuzz(func(t *testing.T, obj []byte) {
		fast, ok := testValues.applyCompact(obj)
		if !ok {
			return
		}
		if want := testValues.applySplit(obj); !bytes.Equal(fast, want) {
			t.Fatalf("applyCompact(%q) = %q, want %q", obj, fast, want)
		}
	})
}
