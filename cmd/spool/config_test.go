package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
)

func TestContract(t *testing.T) {
	def := spool.DefaultContract()
	tests := []struct {
		name  string
		conf  string // "" for no file
		flags []string
		want  spool.Contract
	}{
		{name: "defaults", want: def},
		{
			name: "file renames fields; required follows the new names",
			conf: `{"key_field":"id","order_field":"acct"}`,
			want: spool.Contract{KeyField: "id", OrderField: "acct", SeqField: "seq", AmountField: "amount",
				Required: []string{"id", "acct", "seq", "amount"}, MaxSize: def.MaxSize},
		},
		{
			name: "explicit empty required list",
			conf: `{"required":[],"max_size":2048}`,
			want: spool.Contract{KeyField: "msg_id", OrderField: "order_no", SeqField: "seq", AmountField: "amount",
				Required: []string{}, MaxSize: 2048},
		},
		{
			name:  "flags override the file",
			conf:  `{"key_field":"id","required":["id","acct"],"max_size":2048}`,
			flags: []string{"--key", "event_id", "--require", " event_id , amount ", "--max-size", "1KiB"},
			want: spool.Contract{KeyField: "event_id", OrderField: "order_no", SeqField: "seq", AmountField: "amount",
				Required: []string{"event_id", "amount"}, MaxSize: 1024},
		},
		{
			name:  "flags alone; --require empty means only the key",
			flags: []string{"--seq", "n", "--amount", "value", "--order-key", "acct", "--require", ""},
			want: spool.Contract{KeyField: "msg_id", OrderField: "acct", SeqField: "n", AmountField: "value",
				Required: []string{}, MaxSize: def.MaxSize},
		},
		{
			name:  "file's required kept when flags rename",
			conf:  `{"required":["msg_id"]}`,
			flags: []string{"--amount", "value"},
			want: spool.Contract{KeyField: "msg_id", OrderField: "order_no", SeqField: "seq", AmountField: "value",
				Required: []string{"msg_id"}, MaxSize: def.MaxSize},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.conf != "" {
				write(t, filepath.Join(dir, configName), tt.conf)
			}
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			cf := addContractFlags(fs)
			if err := fs.Parse(tt.flags); err != nil {
				t.Fatal(err)
			}
			got, _, err := cf.contractFrom(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got.KeyField != tt.want.KeyField || got.OrderField != tt.want.OrderField || got.SeqField != tt.want.SeqField ||
				got.AmountField != tt.want.AmountField || got.MaxSize != tt.want.MaxSize || !slices.Equal(got.Required, tt.want.Required) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestKeywordDSNRefused: a --db in libpq's keyword/value form is a usage
// error, and nothing is created for it (queueopen's tests have the forms).
func TestKeywordDSNRefused(t *testing.T) {
	dir := t.TempDir()
	const db = "host=127.0.0.1 dbname=test"
	_, err := queueopen.OpenLedger(t.Context(), dir, ledgerOpts{use: writeLedger}.options(db))
	err = ledgerFailure(err, dir, db)
	var u *cmdline.UsageError
	if !errors.As(err, &u) {
		t.Fatalf("openLedger with a keyword DSN: %v, want a usage error", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("it left %d files in %s", len(entries), dir)
	}
}

// badConfigs are spool.conf files that must be refused, each with what the
// one-line error must say. Each would otherwise change the contract, most
// of them the idempotency key, without a word.
var badConfigs = []struct{ name, conf, sub string }{
	{"key in upper case", `{"KEY_FIELD":"id"}`, `unknown key "KEY_FIELD": keys are case-sensitive, did you mean "key_field"?`},
	{"key in mixed case", `{"Max_Size":10}`, `did you mean "max_size"`},
	{"unknown key", `{"key":"id"}`, `unknown key "key": the keys are key_field, order_field`},
	{"repeated key", `{"key_field":"msg_id","key_field":"id"}`, `key "key_field" appears twice`},
	{"unknown header key", `{"headers":{"trace":"tp","span":"s"}}`, `unknown key "span" in headers: the keys are version, trace, tenant`},
	{"header key in upper case", `{"headers":{"Trace":"tp"}}`, `did you mean "trace"`},
	{"repeated header key", `{"headers":{"trace":"a","trace":"b"}}`, `key "trace" appears twice in headers`},
	{"headers not an object", `{"headers":["trace"]}`, `headers is an array: want an object`},
	{"header field empty", `{"headers":{"tenant":""}}`, `headers.tenant is empty`},
	{"header field a number", `{"headers":{"version":1}}`, `headers.version is a number`},
	{"header field clashes", `{"headers":{"tenant":"order_no"}}`, `order field and tenant header are both "order_no"`},
	{"repeated key, escaped", `{"key_field":"msg_id","key\u005ffield":"id"}`, `key "key_field" appears twice`},
	{"repeated key, same value", `{"max_size":10,"max_size":10}`, `key "max_size" appears twice`},
	{"empty key_field", `{"key_field":""}`, `key_field is empty`},
	{"empty order_field", `{"order_field":""}`, `order_field is empty`},
	{"null key_field", `{"key_field":null}`, `key_field is null`},
	{"null seq_field", `{"seq_field":null}`, `seq_field is null`},
	{"null amount_field", `{"amount_field":null}`, `amount_field is null`},
	{"null required", `{"required":null}`, `required is null`},
	{"null max_size", `{"max_size":null}`, `max_size is null`},
	{"number as field name", `{"key_field":7}`, `key_field is a number: want a field name, a string`},
	{"array as field name", `{"order_field":["a"]}`, `order_field is an array`},
	{"size with a unit", `{"max_size":"1MiB"}`, `max_size is a string: want a whole number of bytes`},
	{"size as boolean", `{"max_size":true}`, `max_size is a boolean`},
	{"size with a fraction", `{"max_size":1.5}`, `max_size 1.5: want a whole number of bytes`},
	{"size in exponent form", `{"max_size":1e6}`, `max_size 1e6: want a whole number`},
	{"size too large", `{"max_size":99999999999999999999}`, `max_size 99999999999999999999 is too large`},
	{"negative size", `{"max_size":-1}`, `max_size -1 is negative`},
	{"zero size", `{"max_size":0}`, `max_size is 0: want at least 1 byte`},
	{"required as a string", `{"required":"msg_id"}`, `required is a string: want an array of field names`},
	{"required with an empty name", `{"required":["msg_id",""]}`, `required[1] is empty`},
	{"required with a number", `{"required":["msg_id",1]}`, `required[1] is a number`},
	{"required with null", `{"required":[null]}`, `required[0] is null`},
	{"required twice the same", `{"required":["msg_id","msg_id"]}`, `required lists "msg_id" twice`},
	{"top level array", `["key_field"]`, `want a JSON object with the keys key_field, order_field, seq_field, amount_field, required, max_size, headers, not an array`},
	{"top level null", `null`, `not null`},
	{"top level string", `"key_field"`, `not a string`},
	{"empty file", ``, `empty file`},
	{"only whitespace", " \n", `empty file`},
	{"trailing object", `{} {}`, `trailing data after the JSON object`},
	{"trailing garbage", `{"max_size":10}x`, `trailing data after the JSON object at offset 15`},
	{"unterminated", `{"key_field": "id",`, `not valid JSON`},
	{"trailing comma", `{"key_field": "id",}`, `not valid JSON at offset`},
	{"byte order mark", "\ufeff{}", `not valid JSON at offset`},
	{"invalid UTF-8", "{\"key_field\":\"i\xffd\"}", `invalid UTF-8 at offset 15`},
	{"clash", `{"key_field":"seq"}`, `bad contract`},
}

func TestBadConfig(t *testing.T) {
	for _, tt := range badConfigs {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, configName)
			write(t, path, tt.conf)
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			c, _, err := addContractFlags(fs).contractFrom(dir)
			if err == nil {
				t.Fatalf("accepted, as %+v", c)
			}
			if got := exitCode(err); got != exitUsage {
				t.Errorf("exit code %d, want %d: %v", got, exitUsage, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, path) {
				t.Errorf("error %q does not name the file %s", msg, path)
			}
			if !strings.Contains(msg, tt.sub) {
				t.Errorf("error %q does not say %q", msg, tt.sub)
			}
			if strings.ContainsAny(msg, "\r\n") {
				t.Errorf("error %q is not one line", msg)
			}
		})
	}
}

// goodConfigs are spool.conf files that must be accepted, with the
// contract each gives with no flags.
var goodConfigs = []struct {
	name, conf string
	want       spool.Contract
}{
	{"empty object", `{}`, spool.DefaultContract()},
	{
		name: "headers",
		conf: `{"headers":{"version":"schema","trace":"traceparent","tenant":"tenant"}}`,
		want: spool.Contract{KeyField: "msg_id", OrderField: "order_no", SeqField: "seq", AmountField: "amount",
			Required: spool.DefaultContract().Required, MaxSize: spool.DefaultMaxSize,
			Headers: spool.HeaderFields{Version: "schema", Trace: "traceparent", Tenant: "tenant"}},
	},
	{"whitespace around", " \n\t{ }\r\n", spool.DefaultContract()},
	{
		name: "every key",
		conf: `{"key_field":"event_id","order_field":"account","seq_field":"n","amount_field":"value","required":["event_id"],"max_size":1}`,
		want: spool.Contract{KeyField: "event_id", OrderField: "account", SeqField: "n", AmountField: "value", Required: []string{"event_id"}, MaxSize: 1},
	},
	{
		name: "escaped key and value",
		conf: `{"key\u005ffield":"\u00e9v\u00e9nement"}`,
		want: spool.Contract{KeyField: "événement", OrderField: "order_no", SeqField: "seq", AmountField: "amount",
			Required: []string{"événement", "order_no", "seq", "amount"}, MaxSize: spool.DefaultMaxSize},
	},
	{
		name: "empty required is only the key",
		conf: `{"required":[]}`,
		want: spool.Contract{KeyField: "msg_id", OrderField: "order_no", SeqField: "seq", AmountField: "amount",
			Required: []string{}, MaxSize: spool.DefaultMaxSize},
	},
	{
		name: "largest size",
		conf: `{"max_size":9223372036854775807}`,
		want: spool.Contract{KeyField: "msg_id", OrderField: "order_no", SeqField: "seq", AmountField: "amount",
			Required: spool.DefaultContract().Required, MaxSize: 1<<63 - 1},
	},
}

func TestGoodConfig(t *testing.T) {
	for _, tt := range goodConfigs {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, configName), tt.conf)
			got, _, err := addContractFlags(flag.NewFlagSet("t", flag.ContinueOnError)).contractFrom(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !contractEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func contractEqual(a, b spool.Contract) bool {
	return a.KeyField == b.KeyField && a.OrderField == b.OrderField && a.SeqField == b.SeqField &&
		a.AmountField == b.AmountField && a.MaxSize == b.MaxSize && slices.Equal(a.Required, b.Required) &&
		(a.Required == nil) == (b.Required == nil) && a.Headers == b.Headers
}

// FuzzParseConfig checks queueopen.ParseConfig against encoding/json on any input:
// it never panics; whatever it accepts, encoding/json decodes to the same
// contract (so strictness only ever refuses, never reinterprets), and
// encoding the result and parsing that again gives it back; and whatever
// it refuses, it says why in one line.
func FuzzParseConfig(f *testing.F) {
	for _, tt := range badConfigs {
		f.Add([]byte(tt.conf))
	}
	for _, tt := range goodConfigs {
		f.Add([]byte(tt.conf))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := queueopen.ParseConfig(data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("error %v with a contract %+v", err, cfg)
			}
			if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("error %q is empty or not one line", msg)
			}
			return
		}
		c := &cfg.Contract
		for _, name := range c.Required {
			if name == "" {
				t.Fatalf("an empty required name from %q: %+v", data, c)
			}
		}
		if c.MaxSize < 0 {
			t.Fatalf("negative max_size from %q", data)
		}
		var std spool.Contract
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&std); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", data, err)
		}
		if !contractEqual(*c, std) {
			t.Fatalf("%q: parseConfig %+v, encoding/json %+v", data, *c, std)
		}
		again, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		cfg2, err := queueopen.ParseConfig(stripZero(again))
		if err != nil {
			t.Fatalf("re-encoded %s refused: %v", again, err)
		}
		if c2 := &cfg2.Contract; !contractEqual(*c, *c2) {
			t.Fatalf("round trip: %+v, then %+v", *c, *c2)
		}
	})
}

// stripZero drops the keys json.Marshal writes for fields a parsed
// contract leaves unset, which parseConfig rightly refuses as "" or null.
func stripZero(data []byte) []byte {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		panic(err)
	}
	for k, v := range m {
		if v == "" || v == nil || v == json.Number("0") {
			delete(m, k)
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return out
}
