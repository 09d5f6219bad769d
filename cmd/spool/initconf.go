package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spoolq/spool/queueopen"
)

// configFile returns the spool.conf that says what the contract flags
// given say, and only that (a key left out keeps its default), one key a
// line in configKeys' order; nil when no contract flag was given. It is
// checked as consume would read it, so that init never writes a file
// consume refuses.
func (cf *contractFlags) configFile() ([]byte, error) {
	var keys [][2]string
	add := func(key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("spool.conf %s: %w", key, err)
		}
		keys = append(keys, [2]string{key, string(b)})
		return nil
	}
	for _, k := range []struct {
		flag, key string
		value     func() any
	}{
		{"key", "key_field", func() any { return cf.key }},
		{"order-key", "order_field", func() any { return cf.order }},
		{"seq", "seq_field", func() any { return cf.seq }},
		{"amount", "amount_field", func() any { return cf.amount }},
		{"require", "required", func() any { return splitList(cf.require) }},
		{"max-size", "max_size", func() any { return cf.maxSize.n }},
	} {
		if given(cf.fs, k.flag) {
			if err := add(k.key, k.value()); err != nil {
				return nil, err
			}
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, kv := range keys {
		sep := ","
		if i == len(keys)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "  %q: %s%s\n", kv[0], kv[1], sep)
	}
	b.WriteString("}\n")
	file, err := queueopen.ParseConfig(b.Bytes())
	if err != nil {
		return nil, err
	}
	file.Path = configName
	if _, err := file.Resolve(queueopen.Override{}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeConfigFile is queueopen.WriteConfig, its refusal of another
// contract worded for the command line.
func writeConfigFile(dir string, data []byte, force bool) (bool, error) {
	wrote, err := queueopen.WriteConfig(dir, data, force)
	var oc *queueopen.OtherContractError
	if errors.As(err, &oc) {
		return false, &usageError{msg: fmt.Sprintf("%s holds another contract than these flags give, and every consumer of the queue reads it. Try: spool check %s to see it, or --force to replace it", oc.Path, dir)}
	}
	return wrote, err
}
