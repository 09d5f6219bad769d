package spool

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestScanSyntax(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		kind    Kind   // want, when valid
		wantErr string // want, exactly, when invalid
	}{
		{"object", `{"a":1}`, KindObject, ""},
		{"empty object", `{}`, KindObject, ""},
		{"empty object spaced", " \t\r\n{ \n } \n", KindObject, ""},
		{"array", `[1, "x", true, false, null, {}, []]`, KindArray, ""},
		{"string", `"x"`, KindString, ""},
		{"integer", `-0`, KindInteger, ""},
		{"number", `1.5e-3`, KindNumber, ""},
		{"true", `true`, KindBoolean, ""},
		{"null", `null`, KindNull, ""},
		{"all escapes", `"\"\\\/\b\f\n\r\t\u00e9\uD834\uDD1E"`, KindString, ""},
		{"lone surrogate escape", `"\uD800"`, KindString, ""},
		{"utf8 in string", `"héllo, 世界 𝄞"`, KindString, ""},
		{"del unescaped", "\"\x7f\"", KindString, ""},

		{"empty", ``, "", "unexpected end of input looking for beginning of value at offset 0"},
		{"space", ` `, "", "unexpected end of input looking for beginning of value at offset 1"},
		{"bad start", `{"a":x}`, "", "invalid character 'x' looking for beginning of value at offset 5"},
		{"single quotes", `{'a':1}`, "", `invalid character '\'' looking for beginning of object key string at offset 1`},
		{"missing colon", `{"a" 1}`, "", "invalid character '1' after object key at offset 5"},
		{"trailing comma object", `{"a":1,}`, "", "invalid character '}' looking for beginning of object key string at offset 7"},
		{"trailing comma array", `[1,]`, "", "invalid character ']' looking for beginning of value at offset 3"},
		{"missing comma", `{"a":1 "b":2}`, "", `invalid character '"' after object key:value pair at offset 7`},
		{"array missing comma", `[1 2]`, "", "invalid character '2' after array element at offset 3"},
		{"unclosed object", `{"a":1`, "", "unexpected end of input after object key:value pair at offset 6"},
		{"unclosed string", `{"a`, "", "unexpected end of input in string literal at offset 3"},
		{"raw newline in string", "{\"a\n\":1}", "", `invalid character '\n' in string literal at offset 3`},
		{"raw tab in string", "\"a\tb\"", "", `invalid character '\t' in string literal at offset 2`},
		{"bad escape", `"\x"`, "", "invalid character 'x' in string escape code at offset 2"},
		{"short unicode escape", `"\u12"`, "", `invalid character '"' in \u hexadecimal character escape at offset 5`},
		{"unicode escape at eof", `"\u12`, "", `unexpected end of input in \u hexadecimal character escape at offset 5`},
		{"escape at eof", `"\`, "", "unexpected end of input in string escape code at offset 2"},
		{"leading zero", `01`, "", "trailing data at offset 1"},
		{"leading plus", `+1`, "", "invalid character '+' looking for beginning of value at offset 0"},
		{"no fraction digits", `1.`, "", "unexpected end of input in numeric literal at offset 2"},
		{"no fraction digits in object", `{"a":1.}`, "", "invalid character '}' in numeric literal at offset 7"},
		{"no exponent digits", `[1e+]`, "", "invalid character ']' in numeric literal at offset 4"},
		{"minus alone", `-`, "", "unexpected end of input in numeric literal at offset 1"},
		{"minus letter", `-x`, "", "invalid character 'x' in numeric literal at offset 1"},
		{"bad literal", `tru`, "", "unexpected end of input in literal true at offset 3"},
		{"wrong literal", `nul1`, "", "invalid character '1' in literal null (expecting 'l') at offset 3"},
		{"capital True", `True`, "", "invalid character 'T' looking for beginning of value at offset 0"},
		{"trailing data", `{"a":1} x`, "", "trailing data at offset 8"},
		{"two objects", `{}{}`, "", "trailing data at offset 2"},
		{"two objects newline", "{}\n{}\n", "", "trailing data at offset 3"},
		{"BOM", "\xEF\xBB\xBF{}", "", "invalid character U+FEFF (byte order mark) looking for beginning of value at offset 0: JSON allows none; write it as UTF-8 without one (PowerShell 5's Out-File -Encoding utf8 writes one)"},
		{"invalid utf8 in string", "{\"a\":\"x\xffy\"}", "", "invalid UTF-8 at offset 7"},
		{"invalid utf8 in key", "{\"\xc3\":1}", "", "invalid UTF-8 at offset 2"},
		{"invalid utf8 outside", "[\xff]", "", "invalid UTF-8 at offset 1"},
		{"invalid utf8 trailing", "{}\xff", "", "invalid UTF-8 at offset 2"},
		{"utf8 surrogate encoded", "\"\xed\xa0\x80\"", "", "invalid UTF-8 at offset 1"},
		{"overlong utf8", "\"\xc0\xaf\"", "", "invalid UTF-8 at offset 1"},
		{"non-ascii outside", `[é]`, "", "invalid character 'é' looking for beginning of value at offset 1"},
		{"NUL outside", "[\x00]", "", `invalid character '\x00' looking for beginning of value at offset 1`},
		{"form feed is not whitespace", "[\f]", "", `invalid character '\f' looking for beginning of value at offset 1`},
		{"comment", `{} // x`, "", "trailing data at offset 3"},
		{"close unopened", `]`, "", "invalid character ']' looking for beginning of value at offset 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, _, err := checkJSON([]byte(tt.in))
			if err != tt.wantErr {
				t.Fatalf("checkJSON(%q) error = %q, want %q", tt.in, err, tt.wantErr)
			}
			if kind != tt.kind {
				t.Errorf("checkJSON(%q) kind = %q, want %q", tt.in, kind, tt.kind)
			}
			if strings.ContainsAny(err, "\r\n") {
				t.Errorf("error %q spans lines", err)
			}
			// encoding/json must agree on every case that is not about
			// UTF-8 inside a string, which it accepts and we reject.
			if utf8.ValidString(tt.in) && json.Valid([]byte(tt.in)) != (err == "") {
				t.Errorf("json.Valid(%q) = %v, but our error is %q", tt.in, json.Valid([]byte(tt.in)), err)
			}
		})
	}
}

// decodeLiteral decodes one JSON string literal with the scanner.
func decodeLiteral(lit string) (string, bool) {
	s := getScanner([]byte(lit))
	defer putScanner(s)
	var buf []byte
	if !s.str(&buf) || s.pos != len(lit) {
		return "", false
	}
	return string(buf), true
}

func TestScanDecodeString(t *testing.T) {
	tests := []struct {
		lit, want string
	}{
		{`""`, ""},
		{`"plain"`, "plain"},
		{`"a\u0062"`, "ab"},
		{`"\"\\\/\b\f\n\r\t"`, "\"\\/\b\f\n\r\t"},
		{`"\u00e9\u00E9"`, "éé"},
		{`"\u0000"`, "\x00"},
		{`"\uD834\uDD1E"`, "𝄞"},
		{`"\ud834\udd1e"`, "𝄞"},
		{`"x\uD800y"`, "x\uFFFDy"},         // lone high surrogate
		{`"\uDC00"`, "\uFFFD"},             // lone low surrogate
		{`"\uDD1E\uD834"`, "\uFFFD\uFFFD"}, // inverted pair
		{`"\uD800\uD800\uDC00"`, "\uFFFD\U00010000"},
		{`"\uD800\n"`, "\uFFFD\n"},
		{`"\uD800\u0041"`, "\uFFFDA"},
		{`"héllo 世界"`, "héllo 世界"},
		{`"a\\u0062"`, `a\u0062`},
	}
	for _, tt := range tests {
		got, ok := decodeLiteral(tt.lit)
		if !ok {
			t.Errorf("decode %s failed", tt.lit)
			continue
		}
		if got != tt.want {
			t.Errorf("decode %s = %q, want %q", tt.lit, got, tt.want)
		}
		// encoding/json is the reference for decoding.
		var ref string
		if err := json.Unmarshal([]byte(tt.lit), &ref); err != nil {
			t.Errorf("json.Unmarshal(%s): %v", tt.lit, err)
		} else if got != ref {
			t.Errorf("decode %s = %q, encoding/json gives %q", tt.lit, got, ref)
		}
	}
}

func TestScanNumber(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		kind Kind
		ok   bool
	}{
		{"0", 1, KindInteger, true},
		{"-0", 2, KindInteger, true},
		{"42", 2, KindInteger, true},
		{"-42", 3, KindInteger, true},
		{"99999999999999999999", 20, KindInteger, true},
		{"1.5", 3, KindNumber, true},
		{"-0.50", 5, KindNumber, true},
		{"1e2", 3, KindNumber, true},
		{"1E+2", 4, KindNumber, true},
		{"1e-2", 4, KindNumber, true},
		{"12345678901234567.89", 20, KindNumber, true},
		{"012", 1, KindInteger, true}, // the number is "0"; the caller sees "12" left
		{"1.5x", 3, KindNumber, true},
		{"", 0, "", false},
		{"-", 1, "", false},
		{"+1", 0, "", false},
		{".5", 0, "", false},
		{"1.", 2, "", false},
		{"1.e2", 2, "", false},
		{"1e", 2, "", false},
		{"1e+", 3, "", false},
		{"-x", 1, "", false},
		{" 1", 0, "", false},
	}
	for _, tt := range tests {
		n, kind, ok := scanNumber([]byte(tt.in))
		if n != tt.n || kind != tt.kind || ok != tt.ok {
			t.Errorf("scanNumber(%q) = %d, %q, %v; want %d, %q, %v", tt.in, n, kind, ok, tt.n, tt.kind, tt.ok)
		}
	}
	for in, want := range map[string]bool{
		"1": true, "-0.50": true, "1E+2": true, "012": false, " 1": false, "1 ": false,
		"+1": false, "": false, "1.5x": false, "0x10": false, "Infinity": false, "NaN": false,
	} {
		if got := isJSONNumber([]byte(in)); got != want {
			t.Errorf("isJSONNumber(%q) = %v, want %v", in, got, want)
		}
		if ref := refIsNumber(in); ref != want {
			t.Errorf("encoding/json says %q is a number: %v; the test wants %v", in, ref, want)
		}
	}
}

func TestScanDuplicateKeys(t *testing.T) {
	many := func(prefix string, n int, extra string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"` + prefix + strings.Repeat("k", i+1) + `":1`)
		}
		b.WriteString(extra + "}")
		return b.String()
	}
	tests := []struct {
		name string
		in   string
		dup  bool
		key  string
	}{
		{"none", `{"a":1,"b":2}`, false, ""},
		{"top level", `{"a":1,"b":2,"a":3}`, true, "a"},
		{"same value", `{"a":1,"a":1}`, true, "a"},
		{"via escape", `{"a":1,"\u0061":2}`, true, "a"},
		{"via surrogate escapes", `{"𝄞":1,"\uD834\uDD1E":2}`, true, "𝄞"},
		{"lone surrogates collide", `{"\uD800":1,"\uDBFF":2}`, true, "\uFFFD"},
		{"empty key", `{"":1,"":2}`, true, ""},
		{"case differs", `{"a":1,"A":2}`, false, ""},
		{"nested", `{"a":{"x":1,"x":2}}`, true, "x"},
		{"nested in array", `[{"x":1},{"y":1,"y":2}]`, true, "y"},
		{"siblings may share keys", `{"a":{"x":1},"b":{"x":2},"x":3}`, false, ""},
		{"levels may share keys", `{"x":{"x":{"x":1}}}`, false, ""},
		{"after nested object", `{"a":{"b":1},"b":2,"a":3}`, true, "a"},
		{"first one wins", `{"a":{"b":1,"b":2},"a":3}`, true, "b"},
		{"many keys, no dup", many("", 100, ""), false, ""},
		{"many keys, dup at end", many("", 100, `,"kkkkk":2`), true, "kkkkk"},
		{"dup right at the threshold", many("", dupLinearMax, `,"k":2`), true, "k"},
		{"many keys nested", `{"o":` + many("", 40, `,"k":2`) + `}`, true, "k"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, dup, err := checkJSON([]byte(tt.in))
			if err != "" {
				t.Fatalf("checkJSON: %s", err)
			}
			if dup != tt.dup {
				t.Fatalf("dup = %v, want %v", dup, tt.dup)
			}
			if key, found := refDupKey([]byte(tt.in)); found != tt.dup || key != tt.key {
				t.Fatalf("reference says %v %q; the test wants %v %q", found, key, tt.dup, tt.key)
			}
			s := getScanner([]byte(tt.in))
			defer putScanner(s)
			s.scan()
			if s.dupKey != tt.key {
				t.Errorf("dupKey = %q, want %q", s.dupKey, tt.key)
			}
		})
	}
}

// refDupKey finds the first key repeated within one object with
// encoding/json's tokenizer, as an independent reference.
func refDupKey(data []byte) (string, bool) {
	type frame struct {
		keys    map[string]bool // nil for an array
		wantKey bool
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		if n := len(stack); n > 0 && stack[n-1].keys != nil && stack[n-1].wantKey {
			if k, ok := tok.(string); ok {
				if stack[n-1].keys[k] {
					return k, true
				}
				stack[n-1].keys[k] = true
				stack[n-1].wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{keys: map[string]bool{}, wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value is complete: its object, if any, expects a key next.
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].wantKey = true
		}
	}
}

func TestScanDepth(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	if _, _, err := checkJSON([]byte(nest(MaxDepth))); err != "" {
		t.Errorf("%d nested arrays: %s", MaxDepth, err)
	}
	_, _, err := checkJSON([]byte(nest(MaxDepth + 1)))
	if want := "nesting deeper than 512 levels at offset 512"; err != want {
		t.Errorf("%d nested arrays: error %q, want %q", MaxDepth+1, err, want)
	}
	objs := strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1)
	if _, _, err := checkJSON([]byte(objs)); !strings.HasPrefix(err, "nesting deeper than") {
		t.Errorf("%d nested objects: error %q", MaxDepth+1, err)
	}
	// Far deeper than any stack would allow without the limit.
	deep := strings.Repeat("[", 1<<20)
	if _, _, err := checkJSON([]byte(deep)); !strings.HasPrefix(err, "nesting deeper than") {
		t.Errorf("1M opening brackets: error %q", err)
	}
}

// FuzzScan compares the scanner's syntax verdict with encoding/json's, and
// its duplicate-key verdict with a tokenizer-based reference.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":1}`, `{"a":[1,2,{"b":null}],"c":"\u00e9"}`, `"\uD834\uDD1E"`,
		`-0.5e+10`, `01`, `1.`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `[1,]`, `{"a" 1}`,
		"\"\xff\"", "\xEF\xBB\xBF{}", `{} {}`, `tru`, `"\u12"`, `[[[[[]]]]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := isJSONNumber(data), refIsNumber(string(data)); got != want {
			t.Fatalf("isJSONNumber(%q) = %v, encoding/json says %v", data, got, want)
		}
		kind, dup, err := checkJSON(data)
		if !utf8.Valid(data) {
			if err == "" {
				t.Fatalf("invalid UTF-8 accepted: %q", data)
			}
			return
		}
		if strings.HasPrefix(err, "nesting deeper than") {
			return // encoding/json allows deeper nesting than MaxDepth
		}
		if want := json.Valid(data); want != (err == "") {
			t.Fatalf("json.Valid = %v, scanner error %q, input %q", want, err, data)
		}
		if err != "" {
			return
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber() // a float64 would overflow on 1e400
		if e := dec.Decode(&v); e != nil {
			t.Fatalf("encoding/json cannot decode what both call valid: %v", e)
		}
		var want Kind
		switch v.(type) {
		case map[string]any:
			want = KindObject
		case []any:
			want = KindArray
		case string:
			want = KindString
		case json.Number:
			want = KindNumber
		case bool:
			want = KindBoolean
		case nil:
			want = KindNull
		}
		if kind != want && !(kind == KindInteger && want == KindNumber) {
			t.Fatalf("kind = %s, encoding/json decoded %T", kind, v)
		}
		key, refDup := refDupKey(data)
		if dup != refDup {
			t.Fatalf("dup = %v, reference %v (%q), input %q", dup, refDup, key, data)
		}
		if dup {
			s := getScanner(data)
			defer putScanner(s)
			s.scan()
			if s.dupKey != key {
				t.Fatalf("dupKey = %q, reference %q", s.dupKey, key)
			}
		}
	})
}

func BenchmarkScan(b *testing.B) {
	data := []byte(benchMessage)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, err := checkJSON(data); err != "" {
			b.Fatal(err)
		}
	}
}

// checkJSON reports whether data is one valid JSON text under the rules of
// this scanner (RFC 8259 plus MaxDepth), the kind of its top-level value,
// and the syntax error when it is not. Duplicate keys are not a syntax
// error; they are reported by the boolean dup. The tests and fuzzers compare the
// scanner with encoding/json through it.
func checkJSON(data []byte) (kind Kind, dup bool, err string) {
	s := getScanner(data)
	defer putScanner(s)
	kind, ok := s.scan()
	if !ok {
		return "", false, s.err
	}
	return kind, s.dup, ""
}
