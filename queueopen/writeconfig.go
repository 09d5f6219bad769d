package queueopen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/spoolq/spool/queue"
)

// SameConfig reports whether the spool.conf of the queue at dir says
// what data says: the same contract and the same format of the files,
// however each is written (batch.Format.Same; a file that also holds an
// approval policy included). A missing file says nothing;
// a broken one says otherwise. An error is a file that cannot be read.
func SameConfig(dir string, data []byte) (exists, same bool, err error) {
	was, err := ReadConfig(dir)
	var ce *ConfigError
	switch {
	case errors.As(err, &ce) && !ce.Invalid:
		return true, false, err
	case err != nil:
		return true, false, nil // a broken file says otherwise
	case was == nil:
		return false, false, nil
	}
	want, err := ParseConfig(data)
	if err != nil {
		return true, false, err
	}
	return true, reflect.DeepEqual(was.Contract, want.Contract) && was.Format.Same(want.Format), nil
}

// OtherContractError refuses to replace a spool.conf (Path) that holds
// another contract than the one to write: it is the contract of every
// consumer of the queue, and its keys decide what is a duplicate.
type OtherContractError struct{ Path string }

// Error names the file.
func (e *OtherContractError) Error() string {
	return fmt.Sprintf("%s holds another contract", e.Path)
}

// WriteConfig writes data to the spool.conf of the queue at dir,
// atomically and durably (queue.CreateFile), mode 0644 since every
// consumer's user reads it, unless the file there says the same already
// (SameConfig); a file that says otherwise is replaced only with force,
// else an *OtherContractError. It returns whether it wrote.
func WriteConfig(dir string, data []byte, force bool) (bool, error) {
	path := filepath.Join(dir, ConfigName)
	exists, same, err := SameConfig(dir, data)
	switch {
	case err != nil:
		return false, err
	case same:
		return false, nil
	case exists && !force:
		return false, &OtherContractError{Path: path}
	}
	err = queue.CreateFile(path, exists, func(tmp string) error {
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			return err
		}
		// CreateFile made it 0600; every consumer's user reads it.
		return os.Chmod(tmp, 0o644)
	})
	if err != nil {
		return false, err
	}
	return true, nil
}

// ConfigKey is one key of a spool.conf to write, and its value, which
// ConfigText encodes as JSON.
type ConfigKey struct {
	Key   string
	Value any
}

// ConfigText returns the spool.conf that says keys, in their order, and
// only them (a key left out keeps its default), one key a line; nil for
// no keys. It is checked as a consumer would read it (ParseConfig, then
// Resolve), so that no face writes a file consume refuses.
func ConfigText(keys []ConfigKey) ([]byte, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, k := range keys {
		v, err := json.Marshal(k.Value)
		if err != nil {
			return nil, fmt.Errorf("spool.conf %s: %w", k.Key, err)
		}
		sep := ","
		if i == len(keys)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "  %q: %s%s\n", k.Key, v, sep)
	}
	b.WriteString("}\n")
	file, err := ParseConfig(b.Bytes())
	if err != nil {
		return nil, err
	}
	file.Path = ConfigName
	if _, err := file.Resolve(Override{}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// formatKeyOrder are the format's keys in the order spool.conf's
// documentation lists them, which NewConfigText writes them in.
var formatKeyOrder = []string{"format", "encoding", "include", "delimiter", "comment", "record", "done_file", "key"}

// NewConfigText returns the spool.conf of a new queue that says what o
// changes of the contract and what f sets of the format, and only that
// (ConfigText, so a key left out keeps its default): the contract's keys
// first (key_field, order_field, seq_field, amount_field, required,
// max_size), then the format's in the order spool.conf's documentation
// lists them; nil when o and f set nothing. spool init writes it
// (WriteConfig).
func NewConfigText(o Override, f FormatOverride) ([]byte, error) {
	var keys []ConfigKey
	for _, k := range []struct {
		key string
		set bool
		v   func() any
	}{
		{"key_field", o.KeyField != nil, func() any { return *o.KeyField }},
		{"order_field", o.OrderField != nil, func() any { return *o.OrderField }},
		{"seq_field", o.SeqField != nil, func() any { return *o.SeqField }},
		{"amount_field", o.AmountField != nil, func() any { return *o.AmountField }},
		{"required", o.Required != nil, func() any { return o.Required }},
		{"max_size", o.MaxSize != nil, func() any { return *o.MaxSize }},
	} {
		if k.set {
			keys = append(keys, ConfigKey{Key: k.key, Value: k.v()})
		}
	}
	for _, k := range formatKeyOrder {
		if v, ok := f[k]; ok {
			keys = append(keys, ConfigKey{Key: k, Value: v})
		}
	}
	return ConfigText(keys)
}
