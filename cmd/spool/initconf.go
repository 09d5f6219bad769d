package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/spoolq/spool/queue"
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

// sameConfig reports whether the spool.conf at path says what data says:
// the same contract, however it is written (a file that also holds an
// approval policy included). A missing file says nothing.
func sameConfig(path string, data []byte) (exists, same bool, err error) {
	was, err := queueopen.ReadConfig(filepath.Dir(path))
	var ce *queueopen.ConfigError
	switch {
	case errors.As(err, &ce) && !ce.Invalid:
		return true, false, err
	case err != nil:
		return true, false, nil // a broken file says otherwise
	case was == nil:
		return false, false, nil
	}
	want, err := queueopen.ParseConfig(data)
	if err != nil {
		return true, false, err
	}
	return true, reflect.DeepEqual(was.Contract, want.Contract), nil
}

// writeConfigFile writes data to DIR/spool.conf atomically and durably,
// unless the file there says the same already; a file that says otherwise
// is replaced only with force: it is the contract of every consumer of
// the queue, and its keys decide what is a duplicate. It returns whether
// it wrote.
func writeConfigFile(dir string, data []byte, force bool) (bool, error) {
	path := filepath.Join(dir, configName)
	exists, same, err := sameConfig(path, data)
	switch {
	case err != nil:
		return false, err
	case same:
		return false, nil
	case exists && !force:
		return false, &usageError{msg: fmt.Sprintf("%s holds another contract than these flags give, and every consumer of the queue reads it. Try: spool check %s to see it, or --force to replace it", path, dir)}
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
