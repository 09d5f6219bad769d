package spool

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse checks Parse against encoding/json on arbitrary bytes: it must
// not panic, must reject only with RejectError, and must agree with
// encoding/json on validity and on every value it extracts.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		benchMessage, msg(), `{}`, ``, ` `, `[]`, `{"msg_id":42}`, `{"msg_id":"a\u0062"}`,
		msg("msg_id", "-0", "order_no", "123456789012345678901234567890"),
		msg("amount", "12345678901234567.89"), msg("amount", `"-0.50"`), msg("amount", `" 1"`),
		msg("seq", "9223372036854775807"), msg("seq", "9223372036854775808"), msg("seq", "1.0"),
		msg("msg_id", `"\uD800"`), msg("msg_id", `"\u0000"`), msg("msg_id", `" "`),
		msg("x", `{"a":1,"\u0061":2}`), `{"msg_id":"a","msg_id":"b"}`,
		"\xEF\xBB\xBF{}", "{\"msg_id\":\"\xff\"}", msg() + msg(), msg() + " x",
		msg("d", strings.Repeat(`[{"a":`, 20)+"0"+strings.Repeat("}]", 20)),
		msg("msg_id", `"k\udbff"`), msg("order_no", `"\uDC00"`), msg("note", `"\ud800"`),
		msg("msg_id", `"`+strings.Repeat("k", MaxKeyLen)+`"`), msg("msg_id", strings.Repeat("7", MaxKeyLen+1)),
		msg("order_no", `"`+strings.Repeat("\\u006f", MaxKeyLen+1)+`"`), msg("amount", "1"+strings.Repeat("0", MaxAmountLen)),
	} {
		f.Add([]byte(s))
	}
	if files, err := filepath.Glob(filepath.Join("testdata", "parse", "*.json")); err == nil {
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	// Small seeds only: the fuzzer minimizes every new input it finds, in
	// time quadratic in its length, and stops mutating while it does.
	for _, file := range suiteFiles(f) {
		if data, err := os.ReadFile(file); err == nil && len(data) <= 512 {
			f.Add(data)
		}
	}
	full, keyOnly := DefaultContract(), DefaultContract()
	keyOnly.Required = nil
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := full.Parse(data)
		checkFuzzResult(t, data, m, err)
		m2, err2 := keyOnly.Parse(data)
		checkFuzzResult(t, data, m2, err2)
		if err == nil && (err2 != nil || m.MsgID != m2.MsgID || m.Amount != m2.Amount || m.Seq != m2.Seq || m.OrderNo != m2.OrderNo) {
			t.Fatalf("the full contract accepts %+v, the key-only contract gives %+v, %v", m, m2, err2)
		}
	})
}

func checkFuzzResult(t *testing.T, data []byte, m *Message, err error) {
	t.Helper()
	valid := json.Valid(data)
	if err != nil {
		re, isReject := err.(*RejectError)
		if !isReject {
			t.Fatalf("error %T %v is not a *RejectError", err, err)
		}
		if m != nil {
			t.Fatalf("a Message with an error")
		}
		if strings.ContainsAny(re.Detail, "\r\n") {
			t.Fatalf("detail %q spans lines", re.Detail)
		}
		if !valid && utf8.Valid(data) && re.Reason != ReasonParse {
			t.Fatalf("encoding/json rejects %q, Parse says %v", data, re)
		}
		if valid && utf8.Valid(data) && re.Reason == ReasonParse &&
			!strings.HasPrefix(re.Detail, "not a JSON object") && !strings.HasPrefix(re.Detail, "nesting deeper") &&
			re.Detail != "empty message" {
			t.Fatalf("encoding/json accepts %q, Parse says %v", data, re)
		}
		return
	}
	if !valid {
		t.Fatalf("Parse accepts %q, encoding/json does not", data)
	}
	if strings.TrimSpace(m.MsgID) == "" {
		t.Fatalf("empty MsgID %q accepted", m.MsgID)
	}
	if len(m.MsgID) > MaxKeyLen || len(m.OrderNo) > MaxKeyLen || len(m.Amount) > MaxAmountLen {
		t.Fatalf("lengths %d, %d, %d accepted, over the limits", len(m.MsgID), len(m.OrderNo), len(m.Amount))
	}
	// A key holds U+FFFD only when it was sent, never for a lone
	// surrogate escape: two keys would otherwise decode alike.
	for _, k := range []struct{ name, value string }{{DefaultKeyField, m.MsgID}, {DefaultOrderField, m.OrderNo}} {
		f, _ := m.Field(k.name)
		raw := strings.ToLower(string(f.Raw))
		if n := strings.Count(k.value, "\uFFFD"); n > strings.Count(raw, "\uFFFD")+strings.Count(raw, `\ufffd`) {
			t.Fatalf("%s %q holds U+FFFD that %s did not send", k.name, k.value, f.Raw)
		}
	}
	if m.Amount != "" && !refIsNumber(string(m.Amount)) {
		t.Fatalf("Amount %q is not a JSON number", m.Amount)
	}
	if m.Seq < 0 {
		t.Fatalf("Seq %d", m.Seq)
	}
	if !bytes.Equal(m.Raw, data) {
		t.Fatalf("Raw is not the input")
	}
	// encoding/json decodes the same values (keys are unique, so its
	// last-wins rule does not matter).
	var ref map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&ref); err != nil {
		t.Fatalf("encoding/json cannot decode an accepted message: %v", err)
	}
	if len(ref) != len(m.Fields) {
		t.Fatalf("%d fields, encoding/json finds %d", len(m.Fields), len(ref))
	}
	for _, f := range m.Fields {
		v, found := ref[f.Name]
		if !found {
			t.Fatalf("field %q unknown to encoding/json", f.Name)
		}
		var want Kind
		switch v := v.(type) {
		case string:
			want = KindString
		case json.Number:
			want = KindNumber
			if !strings.ContainsAny(string(v), ".eE") {
				want = KindInteger
			}
		case bool:
			want = KindBoolean
		case map[string]any:
			want = KindObject
		case []any:
			want = KindArray
		case nil:
			want = KindNull
		}
		if f.Kind != want {
			t.Fatalf("field %q kind %s, encoding/json says %s", f.Name, f.Kind, want)
		}
		if !json.Valid(f.Raw) {
			t.Fatalf("field %q Raw %q is not JSON", f.Name, f.Raw)
		}
	}
	text := func(name string) string {
		switch v := ref[name].(type) {
		case string:
			return v
		case json.Number:
			return string(v)
		}
		return ""
	}
	if m.MsgID != text(DefaultKeyField) || m.OrderNo != text(DefaultOrderField) || string(m.Amount) != text(DefaultAmountField) {
		t.Fatalf("values %q %q %q, encoding/json decodes %q %q %q", m.MsgID, m.OrderNo, m.Amount,
			text(DefaultKeyField), text(DefaultOrderField), text(DefaultAmountField))
	}
	if s := text(DefaultSeqField); (s == "" && m.Seq != 0) || (s != "" && s != itoa(int(m.Seq))) {
		t.Fatalf("Seq %d, encoding/json decodes %q", m.Seq, s)
	}
}

// refIsNumber reports whether s is exactly one JSON number, according to
// encoding/json: the fuzzer's reference for isJSONNumber.
func refIsNumber(s string) bool {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return false
	}
	n, ok := v.(json.Number)
	return ok && string(n) == s
}
