package batch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ConfigKeys are the keys of spool.conf that Set reads, in the order the
// errors list them. They sit beside the contract's keys in the one JSON
// object of the file.
var ConfigKeys = []string{"format", "encoding", "delimiter", "comment", "record", "include", "done_file", "key"}

// Set reads one key of spool.conf (one of ConfigKeys) into f, as
// strictly as spool.conf's other keys are read: a value of the wrong
// type, null or "" is an error, never a default, because each would
// change which files are messages or what their records are without a
// word. An unknown key is an error too. The caller walks the object
// (rejecting repeated keys) and calls Check once every key is set, for
// the rules between keys.
func (f *Format) Set(key string, raw json.RawMessage) error {
	kind := JSONKind(raw)
	if kind == "null" {
		return fmt.Errorf("%w: %s is null: give a value, or leave %s out for the default", ErrBadFormat, key, key)
	}
	switch key {
	case "format", "encoding", "delimiter", "comment", "record", "done_file":
		s, err := configString(key, raw, kind)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadFormat, err)
		}
		switch key {
		case "format":
			f.Kind = s
		case "encoding":
			f.Encoding = s
		case "delimiter":
			f.Delimiter = s
		case "comment":
			f.Comment = s
		case "record":
			f.Record = s
		default:
			f.DoneFile = s
		}
	case "include":
		if kind != "an array" {
			return fmt.Errorf("%w: include is %s: want an array of name patterns, such as [\"*.csv\", \"*.csv.gz\"]", ErrBadFormat, kind)
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return fmt.Errorf("%w: include: %w", ErrBadFormat, err)
		}
		f.Include = make([]string, 0, len(elems)) // [] is a list, and Check refuses it
		for i, e := range elems {
			s, err := configString(fmt.Sprintf("include[%d]", i), e, JSONKind(e))
			if err != nil {
				return fmt.Errorf("%w: %w", ErrBadFormat, err)
			}
			f.Include = append(f.Include, s)
		}
	case "key":
		hash, err := configKey(raw, kind)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadFormat, err)
		}
		f.HashKey = hash
	default:
		for _, k := range ConfigKeys {
			if strings.EqualFold(k, key) {
				return fmt.Errorf("%w: unknown key %q: keys are case-sensitive, did you mean %q?", ErrBadFormat, key, k)
			}
		}
		return fmt.Errorf("%w: unknown key %q: the format's keys are %s", ErrBadFormat, key, strings.Join(ConfigKeys, ", "))
	}
	return nil
}

// configString decodes a non-empty JSON string value.
func configString(key string, raw json.RawMessage, kind string) (string, error) {
	if kind != "a string" {
		return "", fmt.Errorf("%s is %s: want a string", key, kind)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	if s == "" {
		return "", fmt.Errorf("%s is empty: give a value, or leave %s out for the default", key, key)
	}
	return s, nil
}

// configKey decodes "key": an object whose one key is "hash", true. The
// object leaves room for other rules of a record's key; false is refused,
// since leaving "key" out says the same and a false that was meant as
// true would be worse than an error.
func configKey(raw json.RawMessage, kind string) (bool, error) {
	const want = `want {"hash": true}, or leave key out to take the contract's key field`
	if kind != "an object" {
		return false, fmt.Errorf("key is %s: %s", kind, want)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // the opening brace
		return false, fmt.Errorf("key: %w", err)
	}
	var hash, seen bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false, fmt.Errorf("key: %w", err)
		}
		name := tok.(string) // the decoder gives only strings as object keys
		if name != "hash" {
			return false, fmt.Errorf("unknown key %q in key: %s", name, want)
		}
		if seen {
			return false, errors.New(`key "hash" appears twice in key: give it once`)
		}
		seen = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return false, fmt.Errorf("key.hash: %w", err)
		}
		switch k := JSONKind(v); {
		case string(v) == "false":
			return false, fmt.Errorf("key.hash is false: %s", want)
		case string(v) != "true":
			return false, fmt.Errorf("key.hash is %s: %s", k, want)
		}
		hash = true
	}
	if _, err := dec.Token(); err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("key: %w", err)
	}
	if !hash {
		return false, fmt.Errorf("key is {}: %s", want)
	}
	return true, nil
}

// JSONKind names the kind of a valid JSON value ("a string", "an object",
// "null"...) for an error message: the errors of every key of spool.conf,
// Format.Set's and package queueopen's, word it alike.
func JSONKind(raw json.RawMessage) string {
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
