package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/task"
)

// configName is the queue's contract file, DIR/spool.conf: a JSON object
// with the keys key_field, order_field, seq_field, amount_field, required,
// max_size and headers (the fields of the schema version, trace context and
// tenant), each optional. For example:
//
//	{"key_field": "event_id", "order_field": "account", "required": ["event_id"]}
//
// It is read strictly (parseConfig): a key in another case, a repeated or
// unknown key, "" or null for a value is a configuration error, not a
// default, because each would change the idempotency key unnoticed.
const configName = "spool.conf"

// contractFlags are the flags that override the queue's contract file.
type contractFlags struct {
	fs                      *flag.FlagSet
	key, order, seq, amount string
	require                 string
	maxSize                 sizeFlag
}

// addContractFlags registers the contract flags on fs.
func addContractFlags(fs *flag.FlagSet) *contractFlags {
	cf := &contractFlags{fs: fs}
	fs.StringVar(&cf.key, "key", "", "idempotency-key `FIELD` (default msg_id)")
	fs.StringVar(&cf.order, "order-key", "", "ordering-key `FIELD` (default order_no)")
	fs.StringVar(&cf.seq, "seq", "", "sequence `FIELD` (default seq)")
	fs.StringVar(&cf.amount, "amount", "", "money `FIELD`, kept exactly as written (default amount)")
	fs.StringVar(&cf.require, "require", "", "comma-separated required `FIELDS` (default: the four role fields; the key is always required)")
	fs.Var(&cf.maxSize, "max-size", "largest message in `BYTES`, or with KiB/MiB/GiB (default 1MiB)")
	return cf
}

// contract returns the contract of the queue at dir: the defaults, then
// DIR/spool.conf if it exists, then the flags that were given. When
// neither the file nor the flags list the required fields, they are the
// four role fields under their final names, so renaming a field does not
// leave the old name required.
func (cf *contractFlags) contract(dir string) (spool.Contract, error) {
	c, _, err := cf.contractFrom(dir)
	return c, err
}

// contractFrom is contract, which also returns what DIR/spool.conf set
// (nil without the file), for telling where each value came from.
func (cf *contractFlags) contractFrom(dir string) (spool.Contract, *spool.Contract, error) {
	path := filepath.Join(dir, configName)
	file, err := readConfig(path)
	if err != nil {
		return spool.DefaultContract(), nil, err
	}
	c, err := cf.merge(file, path)
	return c, file, err
}

// merge returns the contract of the defaults, then file (what the
// spool.conf at path set; nil for none), then the flags given, checked.
func (cf *contractFlags) merge(file *spool.Contract, path string) (spool.Contract, error) {
	c := spool.DefaultContract()
	var required []string
	requiredSet := false
	if file != nil {
		c.KeyField = cmp.Or(file.KeyField, c.KeyField)
		c.OrderField = cmp.Or(file.OrderField, c.OrderField)
		c.SeqField = cmp.Or(file.SeqField, c.SeqField)
		c.AmountField = cmp.Or(file.AmountField, c.AmountField)
		if file.Required != nil {
			required, requiredSet = file.Required, true
		}
		if file.MaxSize != 0 {
			c.MaxSize = file.MaxSize
		}
		c.Headers = file.Headers
	}

	set := map[string]bool{}
	cf.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["key"] {
		c.KeyField = cf.key
	}
	if set["order-key"] {
		c.OrderField = cf.order
	}
	if set["seq"] {
		c.SeqField = cf.seq
	}
	if set["amount"] {
		c.AmountField = cf.amount
	}
	if set["require"] {
		required, requiredSet = splitList(cf.require), true
	}
	if set["max-size"] {
		c.MaxSize = cf.maxSize.n
	}
	if requiredSet {
		c.Required = required
	} else {
		c.Required = []string{c.KeyField, c.OrderField, c.SeqField, c.AmountField}
	}
	if err := c.Check(); err != nil {
		if file != nil {
			return c, fmt.Errorf("contract from %s and flags: %w", path, err)
		}
		return c, fmt.Errorf("contract: %w", err)
	}
	return c, nil
}

// readConfig reads a contract file; nil, nil when there is none. Every
// problem is a *configError naming the file: a contract that differs from
// what the operator wrote changes the idempotency key without a word.
func readConfig(path string) (*spool.Contract, error) {
	data, err := readRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &configError{path: path, err: err}
	}
	c, err := parseConfig(data)
	if err != nil {
		return nil, &configError{path: path, err: err}
	}
	return c, nil
}

// configKeys are the keys of spool.conf, in the order the errors list them.
var configKeys = []string{"key_field", "order_field", "seq_field", "amount_field", "required", "max_size", "headers"}

// approvalKey is spool.conf's one key beside the contract's: the approval
// policy of replays and discards (task.ParsePolicy, queuePolicy).
const approvalKey = "approval"

// parseConfig decodes spool.conf strictly: one JSON object of valid UTF-8,
// nothing after it; keys exactly as configKeys spell them (case matters),
// each at most once; field names non-empty strings; required an array of
// distinct non-empty strings ([] means only the key); max_size a whole
// number of bytes >= 1. A key left out keeps its default; null or "" is an
// error, never a default, since the operator who wrote the key meant
// something by it. The result has empty strings for the keys left out and a
// nil Required when required is.
//
// encoding/json alone would match keys case-insensitively, let a repeated
// key win and take null as "leave unchanged", so the object is walked token
// by token here and each value checked by hand.
func parseConfig(data []byte) (*spool.Contract, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("invalid UTF-8 at offset %d", invalidUTF8At(data))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	switch {
	case errors.Is(err, io.EOF):
		return nil, errors.New(`empty file: want a JSON object such as {"key_field": "event_id"}`)
	case err != nil:
		return nil, syntaxError(dec, err)
	case tok != json.Delim('{'):
		return nil, fmt.Errorf("want a JSON object with the keys %s, not %s", strings.Join(configKeys, ", "), tokenKind(tok))
	}
	c := &spool.Contract{}
	seen := make(map[string]bool, len(configKeys))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxError(dec, err)
		}
		key := tok.(string) // the decoder gives only strings as object keys
		if !slices.Contains(configKeys, key) && key != approvalKey {
			return nil, unknownKey(key)
		}
		if seen[key] {
			return nil, fmt.Errorf("key %q appears twice: give it once", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, syntaxError(dec, err)
		}
		if err := setConfigKey(c, key, raw); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, syntaxError(dec, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("trailing data after the JSON object at offset %d", dec.InputOffset())
	}
	return c, nil
}

// setConfigKey checks one value of spool.conf and sets it in c.
func setConfigKey(c *spool.Contract, key string, raw json.RawMessage) error {
	kind := jsonKind(raw)
	if kind == "null" {
		return fmt.Errorf("%s is null: give a value, or leave %s out for the default", key, key)
	}
	switch key {
	case approvalKey:
		// The approval policy, not the contract: checked here with the
		// rest of the file, read by confPolicy.
		if _, err := task.ParsePolicy(raw); err != nil {
			return err
		}
	case "key_field", "order_field", "seq_field", "amount_field":
		if kind != "a string" {
			return fmt.Errorf("%s is %s: want a field name, a string", key, kind)
		}
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		if name == "" {
			return fmt.Errorf("%s is empty: give a field name, or leave %s out for the default", key, key)
		}
		switch key {
		case "key_field":
			c.KeyField = name
		case "order_field":
			c.OrderField = name
		case "seq_field":
			c.SeqField = name
		default:
			c.AmountField = name
		}
	case "required":
		if kind != "an array" {
			return fmt.Errorf("required is %s: want an array of field names, such as [\"msg_id\"]", kind)
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return fmt.Errorf("required: %w", err)
		}
		c.Required = make([]string, 0, len(elems)) // [] is a list, not "unset"
		for i, e := range elems {
			if k := jsonKind(e); k != "a string" {
				return fmt.Errorf("required[%d] is %s: want a field name, a string", i, k)
			}
			var name string
			if err := json.Unmarshal(e, &name); err != nil {
				return fmt.Errorf("required[%d]: %w", i, err)
			}
			if name == "" {
				return fmt.Errorf("required[%d] is empty: want a field name", i)
			}
			if slices.Contains(c.Required, name) {
				return fmt.Errorf("required lists %q twice", name)
			}
			c.Required = append(c.Required, name)
		}
	case "max_size":
		n, err := strconv.ParseInt(string(raw), 10, 64)
		switch {
		case kind != "a number":
			return fmt.Errorf("max_size is %s: want a whole number of bytes, such as 1048576", kind)
		case err != nil && errors.Is(err, strconv.ErrRange):
			return fmt.Errorf("max_size %s is too large", raw)
		case err != nil:
			return fmt.Errorf("max_size %s: want a whole number of bytes, such as 1048576", raw)
		case n < 0:
			return fmt.Errorf("max_size %d is negative", n)
		case n == 0:
			// Zero is the library's "default", but someone who wrote 0 may
			// have meant "no limit": neither is said by writing 0.
			return fmt.Errorf("max_size is 0: want at least 1 byte, or leave max_size out for the default %d", spool.DefaultMaxSize)
		}
		c.MaxSize = n
	case "headers":
		h, err := parseHeaders(raw, kind)
		if err != nil {
			return err
		}
		c.Headers = h
	}
	return nil
}

// unknownKey explains a key spool.conf does not have, pointing at the one
// it differs from only in case, or by a typo.
func unknownKey(key string) error {
	keys := append(slices.Clone(configKeys), approvalKey)
	for _, k := range keys {
		if strings.EqualFold(k, key) {
			return fmt.Errorf("unknown key %q: keys are case-sensitive, did you mean %q?", key, k)
		}
	}
	for _, k := range keys {
		// A letter missing, doubled, swapped or wrong, or the underscore.
		if editDistance(k, key) <= 2 {
			return fmt.Errorf("unknown key %q: did you mean %q? The keys are %s", key, k, strings.Join(keys, ", "))
		}
	}
	return fmt.Errorf("unknown key %q: the keys are %s", key, strings.Join(keys, ", "))
}

// jsonKind names the kind of a valid JSON value for an error message.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "empty"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// tokenKind names the kind of the value a json.Token starts.
func tokenKind(tok json.Token) string {
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '[' {
			return "an array"
		}
		return "an object"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// syntaxError describes a JSON syntax error with its byte offset.
func syntaxError(dec *json.Decoder, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("not valid JSON at offset %d: %v", se.Offset, err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("not valid JSON: unexpected end of file at offset %d", dec.InputOffset())
	}
	return fmt.Errorf("not valid JSON at offset %d: %w", dec.InputOffset(), err)
}

// invalidUTF8At returns the offset of the first byte of data that starts
// no valid UTF-8 sequence.
func invalidUTF8At(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(data)
}

// splitList splits a comma-separated list, trimming spaces and dropping
// empty items ("" is the empty list).
func splitList(s string) []string {
	out := []string{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
