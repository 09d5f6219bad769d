package batch

import (
	"bytes"
	"testing"
)

// TestSeqNumberCompact checks that the fast path gives, byte for byte,
// what the json.Decoder path gives, or declines: the record's content
// hash is taken from these bytes.
func TestSeqNumberCompact(t *testing.T) {
	objs := []string{
		`{}`, `{"seq":"17"}`, `{"a":"1","seq":"17","b":"x"}`, `{"seq":"017"}`, `{"seq":"-3"}`,
		`{"seq":"0"}`, `{"seq":"1.0"}`, `{"seq":"x"}`, `{"seq":""}`, `{"seq":17}`, `{"seq":"17","seq":"18"}`,
		`{"se\u0071":"17"}`, `{"a<b":"1","seq":"2"}`, `{ "seq":"17"}`, `{"seq": "17"}`, `{"seq":"17" }`,
		`{"seq":"17"} `, `{"o":{"seq":"1", "x":[1, 2]},"seq":"5"}`, `{"seq":"1"`, `{"seq"}`, `[1]`, ``,
		`{"seq":"\u0031"}`, `{"é":"1","seq":"9"}`, `{"seq":"99999999999999999999999"}`, `{"seq":null}`,
	}
	for _, o := range objs {
		want := seqNumberSplit([]byte(o), "seq")
		got := seqNumber([]byte(o), "seq")
		if !bytes.Equal(got, want) {
			t.Errorf("seqNumber(%s) = %s, want %s", o, got, want)
		}
		if fast, ok := seqNumberCompact([]byte(o), "seq"); ok && !bytes.Equal(fast, want) {
			t.Errorf("seqNumberCompact(%s) = %s, want %s", o, fast, want)
		}
	}
	if _, ok := seqNumberCompact([]byte(`{"a":"1","seq":"17"}`), "seq"); !ok {
		t.Error("seqNumberCompact declined a compact object")
	}
}

// FuzzSeqNumber checks the fast path against the json.Decoder path on
// any object.
func FuzzSeqNumber(f *testing.F) {
	f.Add([]byte(`{"a":"1","seq":"17"}`))
	f.Add([]byte(`{"seq":"-3","o":{"seq":"1"}}`))
	f.Fuzz(func(t *testing.T, obj []byte) {
		fast, ok := seqNumberCompact(obj, "seq")
		if !ok {
			return
		}
		if want := seqNumberSplit(obj, "seq"); !bytes.Equal(fast, want) {
			t.Fatalf("seqNumberCompact(%q) = %q, want %q", obj, fast, want)
		}
	})
}
