package spool

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// benchMessage is a realistic message of about 200 bytes.
const benchMessage = `{"msg_id":"7f9c2b1e-4a3d-4e8b-9c1f-2d3e4f5a6b7c","order_no":"ORD-2024-000123","seq":17,` +
	`"amount":"12345.67","currency":"EUR","customer":{"id":98765,"tier":"gold"},"tags":["priority","eu"],` +
	`"ts":"2024-05-01T12:34:56Z"}`

// msg builds a message from the valid default one: each pair of args sets a
// field's raw JSON value, replacing it in place, or removes the field when
// the value is "-"; new fields are appended.
func msg(args ...string) string {
	keys := []string{"msg_id", "order_no", "seq", "amount"}
	vals := map[string]string{"msg_id": `"m-1"`, "order_no": `"o-1"`, "seq": `1`, "amount": `"10.00"`}
	for i := 0; i+1 < len(args); i += 2 {
		if _, ok := vals[args[i]]; !ok {
			keys = append(keys, args[i])
		}
		vals[args[i]] = args[i+1]
	}
	var b strings.Builder
	b.WriteString("{")
	first := true
	for _, k := range keys {
		if vals[k] == "-" {
			continue
		}
		if !first {
			b.WriteString(",")
		}
		first = false
		b.WriteString(`"` + k + `":` + vals[k])
	}
	b.WriteString("}")
	return b.String()
}

// want is a test's expectation: a Message's contract values, or a rejection.
type want struct {
	msgID, orderNo string
	seq            int64
	amount         Amount

	reason Reason // non-empty: Parse must reject
	field  string
	detail string // exact, when not empty
}

// lone is the detail of a lone surrogate escape esc at offset.
func lone(esc string, offset int) string {
	return "must not contain a lone surrogate escape (no character, decoded as U+FFFD), found " + esc + " at offset " + itoa(offset)
}

func ok(msgID, orderNo string, seq int64, amount Amount) want {
	return want{msgID: msgID, orderNo: orderNo, seq: seq, amount: amount}
}

func rej(reason Reason, field, detail string) want {
	return want{reason: reason, field: field, detail: detail}
}

// check runs Parse and compares with w.
func check(t *testing.T, c Contract, in string, w want) {
	t.Helper()
	m, err := c.Parse([]byte(in))
	if w.reason != "" {
		if err == nil {
			t.Fatalf("Parse(%.80q) = %+v, want %s rejection", in, m, w.reason)
		}
		var re *RejectError
		if !errors.As(err, &re) {
			t.Fatalf("Parse(%.80q) error %T %v, want *RejectError", in, err, err)
		}
		if m != nil {
			t.Errorf("Parse(%.80q) returned a Message with its error", in)
		}
		if re.Reason != w.reason || re.Field != w.field {
			t.Fatalf("Parse(%.80q) = %s field %q (%s), want %s field %q", in, re.Reason, re.Field, re.Detail, w.reason, w.field)
		}
		if w.detail != "" && re.Detail != w.detail {
			t.Errorf("Parse(%.80q) detail %q, want %q", in, re.Detail, w.detail)
		}
		if strings.ContainsAny(re.Detail, "\r\n") {
			t.Errorf("detail %q spans lines", re.Detail)
		}
		return
	}
	if err != nil {
		t.Fatalf("Parse(%.80q): %v", in, err)
	}
	got := want{msgID: m.MsgID, orderNo: m.OrderNo, seq: m.Seq, amount: m.Amount}
	if got != w {
		t.Errorf("Parse(%.80q) = %+v, want %+v", in, got, w)
	}
}

func TestParse(t *testing.T) {
	const (
		keyRule      = "must be a non-empty string or an integer"
		seqRule      = "must be an integer >= 1"
		amountRule   = "must be a JSON number or a string in JSON number syntax"
		groupingHint = " (a decimal comma or digit grouping: write the number in JSON syntax, with a decimal point and no grouping, as 1234.56)"
	)
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name string
		in   string
		want want
	}{
		{"valid", msg(), ok("m-1", "o-1", 1, "10.00")},
		{"realistic", benchMessage, ok("7f9c2b1e-4a3d-4e8b-9c1f-2d3e4f5a6b7c", "ORD-2024-000123", 17, "12345.67")},
		{"whitespace everywhere", " \n{ \"msg_id\" :\t\"m\" , \"order_no\":\"o\",\"seq\" : 2 ,\"amount\": 3 }\r\n ", ok("m", "o", 2, "3")},
		{"other fields kept", msg("note", `{"a":[1,2,{"b":null}]}`, "flag", "true"), ok("m-1", "o-1", 1, "10.00")},

		// Parse errors.
		{"empty", ``, rej(ReasonParse, "", "empty message")},
		{"only whitespace", " \n\t\r ", rej(ReasonParse, "", "empty message")},
		{"array", `[{"msg_id":"m"}]`, rej(ReasonParse, "", arrayDetail)},
		{"string", `"msg"`, rej(ReasonParse, "", "not a JSON object, found string")},
		{"integer", `42`, rej(ReasonParse, "", "not a JSON object, found number")},
		{"number", `4.2`, rej(ReasonParse, "", "not a JSON object, found number")},
		{"true", `true`, rej(ReasonParse, "", "not a JSON object, found boolean")},
		{"null", ` null `, rej(ReasonParse, "", "not a JSON object, found null")},
		{"syntax", `{"msg_id":x}`, rej(ReasonParse, "", "invalid character 'x' looking for beginning of value at offset 10")},
		{"truncated", msg()[:20], rej(ReasonParse, "", "unexpected end of input in string literal at offset 20")},
		{"trailing data", msg() + " x", rej(ReasonParse, "", "trailing data at offset 59")},
		{"trailing comma", msg() + ",", rej(ReasonParse, "", "trailing data at offset 58")},
		{"two objects", msg() + "\n" + msg(), rej(ReasonParse, "", "trailing data at offset 59")},
		{"BOM", "\xEF\xBB\xBF" + msg(), rej(ReasonParse, "", "invalid character U+FEFF (byte order mark) looking for beginning of value at offset 0: JSON allows none; write it as UTF-8 without one (PowerShell 5's Out-File -Encoding utf8 writes one)")},
		{"invalid UTF-8 in msg_id", msg("msg_id", "\"m\xff\""), rej(ReasonParse, "", "invalid UTF-8 at offset 12")},
		{"invalid UTF-8 in other field", msg("note", "\"caf\xe9\""), rej(ReasonParse, "", "invalid UTF-8 at offset 69")},
		{"invalid UTF-8 in key", "{\"\xc3\x28\":1}", rej(ReasonParse, "", "invalid UTF-8 at offset 2")},
		{"nesting MaxDepth+1", msg("deep", deep(MaxDepth)), rej(ReasonParse, "", "nesting deeper than 512 levels at offset 576")},
		{"nesting MaxDepth", msg("deep", deep(MaxDepth-1)), ok("m-1", "o-1", 1, "10.00")},
		{"nesting 1M", msg("deep", strings.Repeat("[", 1<<20)), rej(ReasonParse, "", "nesting deeper than 512 levels at offset 576")},
		{"syntax beats duplicate", `{"msg_id":"a","msg_id":"b"`, rej(ReasonParse, "", "unexpected end of input after object key:value pair at offset 26")},
		{"not an object beats duplicate", `[{"a":1,"a":2}]`, rej(ReasonParse, "", arrayDetail)},

		// Duplicate keys.
		{"duplicate key", `{"msg_id":"a","msg_id":"b","order_no":"o","seq":1,"amount":1}`, rej(ReasonInvalidField, "msg_id", "duplicate key")},
		{"duplicate same value", strings.TrimSuffix(msg("x", "1"), "}") + `,"x":1}`, rej(ReasonInvalidField, "x", "duplicate key")},
		{"duplicate via escape", strings.TrimSuffix(msg(), "}") + `,"\u006dsg_id":"c"}`, rej(ReasonInvalidField, "msg_id", "duplicate key")},
		{"duplicate via partial escape", msg("a\\u0062", "1", "ab", "2"), rej(ReasonInvalidField, "ab", "duplicate key")},
		{"duplicate nested", msg("meta", `{"k":1,"j":2,"k":3}`), rej(ReasonInvalidField, "k", "duplicate key")},
		{"duplicate in array", msg("items", `[{"k":1},{"k":1,"k":2}]`), rej(ReasonInvalidField, "k", "duplicate key")},
		{"duplicate beats missing", `{"a":1,"a":2}`, rej(ReasonInvalidField, "a", "duplicate key")},
		{"duplicate long name cut", msg(strings.Repeat("n", 70000), "1", strings.Repeat("\\u006e", 70000), "2"),
			rej(ReasonInvalidField, strings.Repeat("n", MaxKeyLen)+"...", "duplicate key (a name of 70000 bytes, cut short here)")},
		{"duplicate name at the limit", msg(strings.Repeat("n", MaxKeyLen), "1", strings.Repeat("\\u006e", MaxKeyLen), "2"),
			rej(ReasonInvalidField, strings.Repeat("n", MaxKeyLen), "duplicate key")},
		{"lone surrogates make a duplicate", msg("x", `{"a\ud800":1,"a\udbff":2}`), rej(ReasonInvalidField, "a\uFFFD", "duplicate key")},
		{"same key, different objects", msg("meta", `{"msg_id":1,"x":{"msg_id":2}}`), ok("m-1", "o-1", 1, "10.00")},

		// Missing fields, in contract order.
		{"msg_id missing", msg("msg_id", "-"), rej(ReasonMissingField, "msg_id", "required field is missing")},
		{"msg_id null", msg("msg_id", "null"), rej(ReasonMissingField, "msg_id", "required field is null")},
		{"order_no missing", msg("order_no", "-"), rej(ReasonMissingField, "order_no", "required field is missing")},
		{"order_no null", msg("order_no", "null"), rej(ReasonMissingField, "order_no", "required field is null")},
		{"seq missing", msg("seq", "-"), rej(ReasonMissingField, "seq", "required field is missing")},
		{"seq null", msg("seq", "null"), rej(ReasonMissingField, "seq", "required field is null")},
		{"amount missing", msg("amount", "-"), rej(ReasonMissingField, "amount", "required field is missing")},
		{"amount null", msg("amount", "null"), rej(ReasonMissingField, "amount", "required field is null")},
		{"empty object", `{}`, rej(ReasonMissingField, "msg_id", "required field is missing")},
		{"key first", `{"amount":1,"seq":1}`, rej(ReasonMissingField, "msg_id", "required field is missing")},
		{"then list order", `{"msg_id":"m","amount":null}`, rej(ReasonMissingField, "order_no", "required field is missing")},
		{"seq before amount", `{"amount":null,"msg_id":"m","order_no":"o"}`, rej(ReasonMissingField, "seq", "required field is missing")},
		{"missing beats invalid", msg("msg_id", "true", "amount", "-"), rej(ReasonMissingField, "amount", "required field is missing")},
		{"nested field does not count", `{"x":{"msg_id":"m"},"order_no":"o","seq":1,"amount":1}`, rej(ReasonMissingField, "msg_id", `required field is missing (it is inside "x": the contract reads the top-level fields)`)},
		{"another case", `{"MsgID":"m","order_no":"o","seq":1,"amount":1}`, rej(ReasonMissingField, "msg_id", `required field is missing (the message has "MsgID": the contract names the field "msg_id")`)},
		{"camel case", `{"msg_id":"m","orderNo":"o","seq":1,"amount":1}`, rej(ReasonMissingField, "order_no", `required field is missing (the message has "orderNo": the contract names the field "order_no")`)},
		{"separators", `{"msg-id":"m","order_no":"o","seq":1,"amount":1}`, rej(ReasonMissingField, "msg_id", `required field is missing (the message has "msg-id": the contract names the field "msg_id")`)},
		{"misspellings are not guessed", `{"msg_idd":"m","order_no":"o","sqe":1,"amount":1}`, rej(ReasonMissingField, "msg_id", "required field is missing")},
		{"nothing like it", `{"id":"m","order_no":"o","seq":1,"amount":1,"data":{"x":1},"more":[{"msg_id":1}]}`, rej(ReasonMissingField, "msg_id", "required field is missing")},

		// The key.
		{"integer key", msg("msg_id", "42"), ok("42", "o-1", 1, "10.00")},
		{"negative integer key", msg("msg_id", "-7"), ok("-7", "o-1", 1, "10.00")},
		{"zero key", msg("msg_id", "0"), ok("0", "o-1", 1, "10.00")},
		{"huge integer key", msg("msg_id", "123456789012345678901234567890"), ok("123456789012345678901234567890", "o-1", 1, "10.00")},
		{"escaped key", msg("msg_id", `"a\u0062"`), ok("ab", "o-1", 1, "10.00")},
		{"key with escapes", msg("msg_id", `"x\"y\\z\/\t\uD834\uDD1E"`), ok("x\"y\\z/\t𝄞", "o-1", 1, "10.00")},
		// A lone surrogate escape names no character: "k\ud800" and
		// "k\udbff" would both decode to "k\uFFFD", one key for two.
		{"lone surrogate key", msg("msg_id", `"\uD800"`), rej(ReasonInvalidField, "msg_id", lone(`\uD800`, 11))},
		{"lone high surrogate in key", msg("msg_id", `"k\ud800"`), rej(ReasonInvalidField, "msg_id", lone(`\ud800`, 12))},
		{"another lone high surrogate", msg("msg_id", `"k\udbff"`), rej(ReasonInvalidField, "msg_id", lone(`\udbff`, 12))},
		{"lone low surrogate", msg("msg_id", `"k\uDC00x"`), rej(ReasonInvalidField, "msg_id", lone(`\uDC00`, 12))},
		{"high surrogate then a letter", msg("msg_id", `"\uD800\u0041"`), rej(ReasonInvalidField, "msg_id", lone(`\uD800`, 11))},
		{"pair then lone", msg("msg_id", `"\uD834\uDD1E\uDFFF"`), rej(ReasonInvalidField, "msg_id", lone(`\uDFFF`, 23))},
		{"two high surrogates", msg("msg_id", `"\uD800\uD800\uDC00"`), rej(ReasonInvalidField, "msg_id", lone(`\uD800`, 11))},
		{"U+FFFD escaped is a character", msg("msg_id", `"k\uFFFD"`), ok("k\uFFFD", "o-1", 1, "10.00")},
		{"U+FFFD raw is a character", msg("msg_id", "\"k\uFFFD\""), ok("k\uFFFD", "o-1", 1, "10.00")},
		{"lone surrogate in another field kept", msg("note", `"\ud800"`), ok("m-1", "o-1", 1, "10.00")},
		{"lone surrogate in a nested key kept", msg("note", `{"\ud800":1}`), ok("m-1", "o-1", 1, "10.00")},

		// Every engine indexes the keys: MaxKeyLen bytes at most, decoded.
		{"key at the limit", msg("msg_id", `"`+strings.Repeat("k", MaxKeyLen)+`"`), ok(strings.Repeat("k", MaxKeyLen), "o-1", 1, "10.00")},
		{"key over the limit", msg("msg_id", `"`+strings.Repeat("k", MaxKeyLen+1)+`"`), rej(ReasonInvalidField, "msg_id", "must be at most 1024 bytes, found 1025 bytes")},
		{"key far over the limit", msg("msg_id", `"`+strings.Repeat("k", 3000)+`"`), rej(ReasonInvalidField, "msg_id", "must be at most 1024 bytes, found 3000 bytes")},
		{"key at the limit once decoded", msg("msg_id", `"`+strings.Repeat(`\u006b`, MaxKeyLen)+`"`), ok(strings.Repeat("k", MaxKeyLen), "o-1", 1, "10.00")},
		{"key over the limit in bytes, not runes", msg("msg_id", `"`+strings.Repeat("é", MaxKeyLen/2+1)+`"`), rej(ReasonInvalidField, "msg_id", "must be at most 1024 bytes, found 1026 bytes")},
		{"integer key at the limit", msg("msg_id", "1"+strings.Repeat("0", MaxKeyLen-1)), ok("1"+strings.Repeat("0", MaxKeyLen-1), "o-1", 1, "10.00")},
		{"integer key over the limit", msg("msg_id", "1"+strings.Repeat("0", MaxKeyLen)), rej(ReasonInvalidField, "msg_id", "must be at most 1024 bytes, found 1025 bytes")},
		{"type beats length", msg("msg_id", "1."+strings.Repeat("0", MaxKeyLen)), rej(ReasonInvalidField, "msg_id", keyRule+", found number 1."+strings.Repeat("0", 38)+"...")},
		{"padded key kept", msg("msg_id", `" m "`), ok(" m ", "o-1", 1, "10.00")},
		{"empty key", msg("msg_id", `""`), rej(ReasonInvalidField, "msg_id", keyRule+", found an empty string")},
		{"whitespace key", msg("msg_id", `"  \t "`), rej(ReasonInvalidField, "msg_id", keyRule+", found a string of only whitespace")},
		{"escaped whitespace key", msg("msg_id", `"\n\u00a0\u2003"`), rej(ReasonInvalidField, "msg_id", keyRule+", found a string of only whitespace")},
		{"NUL in key", msg("msg_id", `"a\u0000"`), rej(ReasonInvalidField, "msg_id", "must not contain U+0000 (NUL)")},
		{"decimal key", msg("msg_id", "1.5"), rej(ReasonInvalidField, "msg_id", keyRule+", found number 1.5")},
		{"exponent key", msg("msg_id", "1e3"), rej(ReasonInvalidField, "msg_id", keyRule+", found number 1e3")},
		{"boolean key", msg("msg_id", "true"), rej(ReasonInvalidField, "msg_id", keyRule+", found boolean true")},
		{"object key", msg("msg_id", `{"id":1}`), rej(ReasonInvalidField, "msg_id", keyRule+", found object")},
		{"array key", msg("msg_id", `["m"]`), rej(ReasonInvalidField, "msg_id", keyRule+", found array")},

		// The order key follows the same rule.
		{"integer order", msg("order_no", "7"), ok("m-1", "7", 1, "10.00")},
		{"escaped order", msg("order_no", `"\u004F-1"`), ok("m-1", "O-1", 1, "10.00")},
		{"empty order", msg("order_no", `""`), rej(ReasonInvalidField, "order_no", keyRule+", found an empty string")},
		{"whitespace order", msg("order_no", `" "`), rej(ReasonInvalidField, "order_no", keyRule+", found a string of only whitespace")},
		{"boolean order", msg("order_no", `false`), rej(ReasonInvalidField, "order_no", keyRule+", found boolean false")},
		{"key checked before order", msg("msg_id", "[]", "order_no", "[]"), rej(ReasonInvalidField, "msg_id", keyRule+", found array")},
		{"lone surrogate order", msg("order_no", `"O-\udbff"`), rej(ReasonInvalidField, "order_no", lone(`\udbff`, 30))},
		{"order at the limit", msg("order_no", `"`+strings.Repeat("o", MaxKeyLen)+`"`), ok("m-1", strings.Repeat("o", MaxKeyLen), 1, "10.00")},
		{"order over the limit", msg("order_no", `"`+strings.Repeat("o", 3000)+`"`), rej(ReasonInvalidField, "order_no", "must be at most 1024 bytes, found 3000 bytes")},
		{"integer order over the limit", msg("order_no", strings.Repeat("9", MaxKeyLen+1)), rej(ReasonInvalidField, "order_no", "must be at most 1024 bytes, found 1025 bytes")},

		// The sequence.
		{"seq max", msg("seq", "9223372036854775807"), ok("m-1", "o-1", 9223372036854775807, "10.00")},
		{"seq large", msg("seq", "1000000"), ok("m-1", "o-1", 1000000, "10.00")},
		{"seq overflow", msg("seq", "9223372036854775808"), rej(ReasonInvalidField, "seq", seqRule+" that fits in 64 bits, found 9223372036854775808")},
		{"seq huge", msg("seq", "99999999999999999999"), rej(ReasonInvalidField, "seq", seqRule+" that fits in 64 bits, found 99999999999999999999")},
		{"seq zero", msg("seq", "0"), rej(ReasonInvalidField, "seq", seqRule+", found 0")},
		{"seq negative zero", msg("seq", "-0"), rej(ReasonInvalidField, "seq", seqRule+", found -0")},
		{"seq negative", msg("seq", "-1"), rej(ReasonInvalidField, "seq", seqRule+", found -1")},
		{"seq 1.0", msg("seq", "1.0"), rej(ReasonInvalidField, "seq", seqRule+", found number 1.0 (a whole number written with a fraction, as a float column exports it: write 1)")},
		{"seq 12.00 quoted", msg("seq", `"12.00"`), rej(ReasonInvalidField, "seq", seqRule+`, found string "12.00" (a whole number written with a fraction, as a float column exports it: write 12)`)},
		{"seq 0.0", msg("seq", "0.0"), rej(ReasonInvalidField, "seq", seqRule+", found number 0.0")},
		{"seq 1.5", msg("seq", "1.5"), rej(ReasonInvalidField, "seq", seqRule+", found number 1.5")},
		{"seq leading zeros", msg("seq", `"007"`), rej(ReasonInvalidField, "seq", seqRule+`, found string "007" (leading zeros: write 7)`)},
		{"seq spaces", msg("seq", `" 3"`), rej(ReasonInvalidField, "seq", seqRule+`, found string " 3" (white space around the number)`)},
		{"seq grouped", msg("seq", `"1,000"`), rej(ReasonInvalidField, "seq", seqRule+`, found string "1,000" (digit grouping: write 1000)`)},
		{"seq zeros only", msg("seq", `"000"`), rej(ReasonInvalidField, "seq", seqRule+`, found string "000"`)},
		{"seq 1e2", msg("seq", "1e2"), rej(ReasonInvalidField, "seq", seqRule+", found number 1e2")},
		{"seq string", msg("seq", `"3"`), rej(ReasonInvalidField, "seq", seqRule+`, found string "3" (a number in quotes: write it as an integer, 3)`)},
		{"seq word", msg("seq", `"three"`), rej(ReasonInvalidField, "seq", seqRule+`, found string "three"`)},
		{"seq boolean", msg("seq", `true`), rej(ReasonInvalidField, "seq", seqRule+", found boolean true")},
		{"seq long number clipped", msg("seq", "1."+strings.Repeat("5", 60)), rej(ReasonInvalidField, "seq", seqRule+", found number 1."+strings.Repeat("5", 38)+"...")},

		// The amount, exact.
		{"amount exact number", msg("amount", "12345678901234567.89"), ok("m-1", "o-1", 1, "12345678901234567.89")},
		{"amount exact string", msg("amount", `"12345678901234567.89"`), ok("m-1", "o-1", 1, "12345678901234567.89")},
		{"amount negative", msg("amount", "-0.50"), ok("m-1", "o-1", 1, "-0.50")},
		{"amount negative string", msg("amount", `"-0.50"`), ok("m-1", "o-1", 1, "-0.50")},
		{"amount exponent", msg("amount", "1E+2"), ok("m-1", "o-1", 1, "1E+2")},
		{"amount exponent string", msg("amount", `"1e-2"`), ok("m-1", "o-1", 1, "1e-2")},
		{"amount integer", msg("amount", "0"), ok("m-1", "o-1", 1, "0")},
		{"amount trailing zeros kept", msg("amount", "10.500"), ok("m-1", "o-1", 1, "10.500")},
		{"amount huge", msg("amount", "1"+strings.Repeat("0", 400)), ok("m-1", "o-1", 1, Amount("1"+strings.Repeat("0", 400)))},
		{"amount at the limit", msg("amount", "1"+strings.Repeat("0", MaxAmountLen-1)), ok("m-1", "o-1", 1, Amount("1"+strings.Repeat("0", MaxAmountLen-1)))},
		{"amount over the limit", msg("amount", "1"+strings.Repeat("0", MaxAmountLen)), rej(ReasonInvalidField, "amount", "must be at most 1024 bytes, found 1025 bytes")},
		{"amount string over the limit", msg("amount", `"1.`+strings.Repeat("5", 70000)+`"`), rej(ReasonInvalidField, "amount", "must be at most 1024 bytes, found 70002 bytes")},
		{"amount escaped string", msg("amount", `"\u0031\u0032.5"`), ok("m-1", "o-1", 1, "12.5")},
		{"amount leading space", msg("amount", `" 12.5"`), rej(ReasonInvalidField, "amount", amountRule+`, found string " 12.5" (white space around the number)`)},
		{"amount trailing space", msg("amount", `"12.5 "`), rej(ReasonInvalidField, "amount", amountRule+`, found string "12.5 " (white space around the number)`)},
		{"amount plus", msg("amount", `"+1"`), rej(ReasonInvalidField, "amount", amountRule+`, found string "+1"`)},
		{"amount leading zero", msg("amount", `"012"`), rej(ReasonInvalidField, "amount", amountRule+`, found string "012"`)},
		{"amount comma", msg("amount", `"1,50"`), rej(ReasonInvalidField, "amount", amountRule+`, found string "1,50"`+groupingHint)},
		{"amount grouped", msg("amount", `"1.234,56"`), rej(ReasonInvalidField, "amount", amountRule+`, found string "1.234,56"`+groupingHint)},
		{"amount grouped by spaces", msg("amount", `"-1\u00a0234.50"`), rej(ReasonInvalidField, "amount", amountRule+`, found string "-1\u00a0234.50"`+groupingHint)},
		{"amount grouped by apostrophes", msg("amount", `"1'234.50"`), rej(ReasonInvalidField, "amount", amountRule+`, found string "1'234.50"`+groupingHint)},
		{"amount currency code", msg("amount", `"5.00 EUR"`), rej(ReasonInvalidField, "amount", amountRule+`, found string "5.00 EUR" (a currency sign or code beside the number: write 5.00 alone)`)},
		{"amount currency sign", msg("amount", `"€-5"`), rej(ReasonInvalidField, "amount", amountRule+`, found string "€-5" (a currency sign or code beside the number: write -5 alone)`)},
		{"amount words", msg("amount", `"five"`), rej(ReasonInvalidField, "amount", amountRule+`, found string "five"`)},
		{"amount dots only", msg("amount", `"..."`), rej(ReasonInvalidField, "amount", amountRule+`, found string "..."`)},
		{"amount points", msg("amount", `"1.234.567"`), rej(ReasonInvalidField, "amount", amountRule+`, found string "1.234.567"`+groupingHint)},
		{"amount empty string", msg("amount", `""`), rej(ReasonInvalidField, "amount", amountRule+`, found an empty string`)},
		{"amount dot", msg("amount", `"1."`), rej(ReasonInvalidField, "amount", amountRule+`, found string "1."`)},
		{"amount NaN", msg("amount", `"NaN"`), rej(ReasonInvalidField, "amount", amountRule+`, found string "NaN"`)},
		{"amount currency", msg("amount", `"$5"`), rej(ReasonInvalidField, "amount", amountRule+`, found string "$5" (a currency sign or code beside the number: write 5 alone)`)},
		{"amount boolean", msg("amount", `true`), rej(ReasonInvalidField, "amount", amountRule+", found boolean true")},
		{"amount object", msg("amount", `{"value":1}`), rej(ReasonInvalidField, "amount", amountRule+", found object")},
		{"amount array", msg("amount", `[1]`), rej(ReasonInvalidField, "amount", amountRule+", found array")},
		{"amount long string clipped", msg("amount", `"`+strings.Repeat("é", 30)+`"`), rej(ReasonInvalidField, "amount", amountRule+`, found string "`+strings.Repeat("é", 19)+"...")},
	}
	c := DefaultContract()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, c, tt.in, tt.want) })
	}
}

func TestParseCustomContract(t *testing.T) {
	c := Contract{
		KeyField:    "id",
		OrderField:  "account",
		SeqField:    "n",
		AmountField: "value",
		Required:    []string{"value", "currency"},
	}
	tests := []struct {
		name string
		in   string
		want want
	}{
		{"minimal", `{"id":5,"value":"3.10","currency":"EUR"}`, ok("5", "", 0, "3.10")},
		{"all roles", `{"id":"x","account":"acc","n":3,"value":-1,"currency":"EUR"}`, ok("x", "acc", 3, "-1")},
		{"default names are plain fields", `{"id":"x","value":1,"currency":"EUR","msg_id":true,"seq":"no","amount":[]}`, ok("x", "", 0, "1")},
		{"optional roles may be null", `{"id":"x","value":1,"currency":"EUR","account":null,"n":null}`, ok("x", "", 0, "1")},
		{"key always required", `{"value":1,"currency":"EUR"}`, rej(ReasonMissingField, "id", "required field is missing")},
		{"key null", `{"id":null,"value":1,"currency":"EUR"}`, rej(ReasonMissingField, "id", "required field is null")},
		{"listed field missing", `{"id":"x","currency":"EUR"}`, rej(ReasonMissingField, "value", "required field is missing")},
		{"non-role required field", `{"id":"x","value":1}`, rej(ReasonMissingField, "currency", "required field is missing")},
		{"optional role still type-checked", `{"id":"x","value":1,"currency":"EUR","n":0}`, rej(ReasonInvalidField, "n", "must be an integer >= 1, found 0")},
		{"optional order still type-checked", `{"id":"x","value":1,"currency":"EUR","account":""}`, rej(ReasonInvalidField, "account", "must be a non-empty string or an integer, found an empty string")},
		{"configured key named", `{"id":1.5,"value":1,"currency":"EUR"}`, rej(ReasonInvalidField, "id", "must be a non-empty string or an integer, found number 1.5")},
		{"configured amount named", `{"id":"x","value":"1 ","currency":"EUR"}`, rej(ReasonInvalidField, "value", `must be a JSON number or a string in JSON number syntax, found string "1 " (white space around the number)`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, c, tt.in, tt.want) })
	}

	// Roles left empty are not checked: only the key is indispensable.
	keyOnly := Contract{KeyField: "k"}
	check(t, keyOnly, `{"k":"v","seq":"x","amount":true}`, ok("v", "", 0, ""))
}

func TestParseBadContract(t *testing.T) {
	_, err := Contract{}.Parse([]byte(`{"":"x"}`))
	if !errors.Is(err, ErrBadContract) {
		t.Fatalf("zero Contract: error %v, want ErrBadContract", err)
	}
	var re *RejectError
	if errors.As(err, &re) {
		t.Errorf("zero Contract: %v is a RejectError; a bad contract is no message's fault", err)
	}
}

func TestParseFields(t *testing.T) {
	in := []byte(` { "msg_id" : "m" , "n\u0061me":"x\ny", "order_no":7,"seq" : 2,"amount":-1.5e3,` +
		`"ok":false, "nested" : { "a" : [ 1 , 2 ] } , "list":[ ],"nothing":null } `)
	m, err := DefaultContract().Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	wantFields := []struct {
		name string
		kind Kind
		raw  string
	}{
		{"msg_id", KindString, `"m"`},
		{"name", KindString, `"x\ny"`},
		{"order_no", KindInteger, `7`},
		{"seq", KindInteger, `2`},
		{"amount", KindNumber, `-1.5e3`},
		{"ok", KindBoolean, `false`},
		{"nested", KindObject, `{ "a" : [ 1 , 2 ] }`},
		{"list", KindArray, `[ ]`},
		{"nothing", KindNull, `null`},
	}
	if len(m.Fields) != len(wantFields) {
		t.Fatalf("got %d fields, want %d: %+v", len(m.Fields), len(wantFields), m.Fields)
	}
	for i, w := range wantFields {
		f := m.Fields[i]
		if f.Name != w.name || f.Kind != w.kind || string(f.Raw) != w.raw {
			t.Errorf("field %d = {%q %s %q}, want {%q %s %q}", i, f.Name, f.Kind, f.Raw, w.name, w.kind, w.raw)
		}
		if cap(f.Raw) != len(f.Raw) {
			t.Errorf("field %q: Raw has spare capacity %d; an append would overwrite the message", f.Name, cap(f.Raw)-len(f.Raw))
		}
	}
	if got := (want{msgID: m.MsgID, orderNo: m.OrderNo, seq: m.Seq, amount: m.Amount}); got != ok("m", "7", 2, "-1.5e3") {
		t.Errorf("contract values = %+v", got)
	}
	if &m.Raw[0] != &in[0] || len(m.Raw) != len(in) {
		t.Errorf("Message.Raw is not the input")
	}
	if f, found := m.Field("name"); !found || string(f.Raw) != `"x\ny"` {
		t.Errorf(`Field("name") = %+v, %v`, f, found)
	}
}

// TestParseReusesNoState parses messages of different shapes in turn: the
// pooled scanner must not carry anything from one message into the next.
func TestParseReusesNoState(t *testing.T) {
	c := DefaultContract()
	big := msg("meta", `{"a":1,"b":{"c":2,"d":[{"e":3}]}}`, "msg_id", `"first"`)
	small := `{"msg_id":"s","order_no":"o","seq":3,"amount":"0.01"}`
	for i := 0; i < 3; i++ {
		check(t, c, big, ok("first", "o-1", 1, "10.00"))
		check(t, c, `{"a":1,"a":2}`, rej(ReasonInvalidField, "a", "duplicate key"))
		check(t, c, `{"x":`, rej(ReasonParse, "", ""))
		check(t, c, small, ok("s", "o", 3, "0.01"))
	}
	m1, _ := c.Parse([]byte(big))
	m2, _ := c.Parse([]byte(small))
	if m1.MsgID != "first" || len(m1.Fields) != 5 || m1.Fields[4].Name != "meta" || len(m2.Fields) != 4 {
		t.Errorf("messages changed after another parse: %+v / %+v", m1, m2)
	}
}

// TestParseConcurrent parses from many goroutines at once, as a worker pool
// does: the pooled scanners must never be shared (run it with -race).
func TestParseConcurrent(t *testing.T) {
	c := DefaultContract()
	done := make(chan error)
	const workers, rounds = 8, 200
	for w := 0; w < workers; w++ {
		go func() {
			for i := 0; i < rounds; i++ {
				id := itoa(w*rounds + i + 1)
				in := msg("msg_id", `"id-`+id+`"`, "seq", id, "pad", `{"x":[`+id+`]}`)
				m, err := c.Parse([]byte(in))
				if err != nil {
					done <- err
					return
				}
				if m.MsgID != "id-"+id || itoa(int(m.Seq)) != id || m.Fields[4].Name != "pad" {
					done <- errors.New("got " + m.MsgID + " for id-" + id)
					return
				}
			}
			done <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestParseTestdata runs the files of testdata/parse, named REASON__case.json
// ("ok" for a valid message).
func TestParseTestdata(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "parse", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no files in testdata/parse")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			reason, _, found := strings.Cut(filepath.Base(file), "__")
			if !found {
				t.Fatalf("name is not REASON__case.json")
			}
			_, err = DefaultContract().Parse(data)
			got := "ok"
			var re *RejectError
			if errors.As(err, &re) {
				got = string(re.Reason)
			} else if err != nil {
				t.Fatalf("error %T %v is not a RejectError", err, err)
			}
			if got != reason {
				t.Errorf("got %s (%v), want %s", got, err, reason)
			}
		})
	}
}

// TestParseHostile feeds inputs built to make a careless parser quadratic,
// deep or greedy. Each must finish, with the expected verdict.
func TestParseHostile(t *testing.T) {
	var manyKeys strings.Builder
	manyKeys.WriteString(`{"msg_id":"m","order_no":"o","seq":1,"amount":1,"o":{`)
	for i := 0; i < 200000; i++ {
		if i > 0 {
			manyKeys.WriteByte(',')
		}
		manyKeys.WriteString(`"k` + itoa(i) + `":0`)
	}
	manyKeys.WriteString(`}}`)
	tests := []struct {
		name string
		in   string
		want want
	}{
		{"200k distinct nested keys", manyKeys.String(), ok("m", "o", 1, "1")},
		{"200k top-level keys, dup last", func() string {
			var b strings.Builder
			b.WriteString(`{"msg_id":"m"`)
			for i := 0; i < 200000; i++ {
				b.WriteString(`,"` + itoa(i) + `":0`)
			}
			b.WriteString(`,"199999":1}`)
			return b.String()
		}(), rej(ReasonInvalidField, "199999", "duplicate key")},
		{"1M opening brackets", strings.Repeat("[", 1<<20), rej(ReasonParse, "", "nesting deeper than 512 levels at offset 512")},
		{"1M opening braces", strings.Repeat(`{"":`, 1<<18), rej(ReasonParse, "", "nesting deeper than 512 levels at offset 2048")},
		{"long string", `{"msg_id":"` + strings.Repeat("é", 1<<19) + `"}`, rej(ReasonMissingField, "order_no", "required field is missing")},
		{"long escapes", `{"msg_id":"` + strings.Repeat(`\uD834\uDD1E`, 1<<16) + `","x":"\`, rej(ReasonParse, "", "")},
		{"long number", `{"msg_id":` + strings.Repeat("9", 1<<20) + `}`, rej(ReasonMissingField, "order_no", "required field is missing")},
	}
	c := DefaultContract()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, c, tt.in, tt.want) })
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestParseAllocs(t *testing.T) {
	if raceEnabled() {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	data := []byte(benchMessage)
	c := DefaultContract()
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := c.Parse(data); err != nil {
			t.Fatal(err)
		}
	})
	// The Message, its Fields and one string holding every name and value.
	if allocs > 3 {
		t.Errorf("Parse of a %d-byte message: %v allocations, want at most 3", len(data), allocs)
	}
}

func raceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

func BenchmarkParse(b *testing.B) {
	data := []byte(benchMessage)
	c := DefaultContract()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := c.Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseEncodingJSON is the baseline Parse is measured against:
// encoding/json decoding the same message into raw fields, which still
// misses duplicate keys and invalid UTF-8.
func BenchmarkParseEncodingJSON(b *testing.B) {
	data := []byte(benchMessage)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			b.Fatal(err)
		}
	}
}

// arrayDetail is the detail of a message that is an array.
const arrayDetail = "not a JSON object, found array (a message is one object; for a file of many, write JSON Lines, an object a line, to a queue of format jsonl)"
