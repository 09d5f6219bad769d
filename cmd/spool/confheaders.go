package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spoolq/spool"
)

// headerKeys are the keys of spool.conf's "headers" object.
var headerKeys = []string{"version", "trace", "tenant"}

// parseHeaders decodes spool.conf's "headers" value as strictly as the
// file itself: an object whose keys are among headerKeys, exactly spelt,
// once each, every value a non-empty field name. {} names no header.
func parseHeaders(raw json.RawMessage, kind string) (spool.HeaderFields, error) {
	var h spool.HeaderFields
	if kind != "an object" {
		return h, fmt.Errorf(`headers is %s: want an object such as {"trace": "traceparent", "tenant": "tenant"}`, kind)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // the opening brace
		return h, fmt.Errorf("headers: %w", err)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return h, fmt.Errorf("headers: %w", err)
		}
		key := tok.(string)
		var field *string
		switch key {
		case "version":
			field = &h.Version
		case "trace":
			field = &h.Trace
		case "tenant":
			field = &h.Tenant
		default:
			for _, k := range headerKeys {
				if strings.EqualFold(k, key) {
					return h, fmt.Errorf("unknown key %q in headers: keys are case-sensitive, did you mean %q?", key, k)
				}
			}
			return h, fmt.Errorf("unknown key %q in headers: the keys are %s", key, strings.Join(headerKeys, ", "))
		}
		if seen[key] {
			return h, fmt.Errorf("key %q appears twice in headers: give it once", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return h, fmt.Errorf("headers.%s: %w", key, err)
		}
		if k := jsonKind(v); k != "a string" {
			return h, fmt.Errorf("headers.%s is %s: want a field name, a string", key, k)
		}
		if err := json.Unmarshal(v, field); err != nil {
			return h, fmt.Errorf("headers.%s: %w", key, err)
		}
		if *field == "" {
			return h, fmt.Errorf("headers.%s is empty: give a field name, or leave %s out", key, key)
		}
	}
	if _, err := dec.Token(); err != nil && !errors.Is(err, io.EOF) {
		return h, fmt.Errorf("headers: %w", err)
	}
	return h, nil
}
