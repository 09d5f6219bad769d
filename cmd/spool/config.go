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
	"os"
	"path/filepath"
	"strings"

	"github.com/spoolq/spool"
)

// configName is the queue's contract file, DIR/spool.conf: a JSON object
// with the keys key_field, order_field, seq_field, amount_field, required
// and max_size, each optional. For example:
//
//	{"key_field": "event_id", "order_field": "account", "required": ["event_id"]}
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
	c := spool.DefaultContract()
	var required []string
	requiredSet := false

	path := filepath.Join(dir, configName)
	file, err := readConfig(path)
	if err != nil {
		return c, err
	}
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

// readConfig reads a contract file; nil, nil when there is none.
func readConfig(path string) (*spool.Contract, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &configError{path: path, err: err}
	}
	var c spool.Contract
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, &configError{path: path, err: fmt.Errorf("want a JSON object with key_field, order_field, seq_field, amount_field, required, max_size: %w", err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &configError{path: path, err: errors.New("trailing data after the JSON object")}
	}
	if c.MaxSize < 0 {
		return nil, &configError{path: path, err: fmt.Errorf("max_size %d is negative", c.MaxSize)}
	}
	for _, f := range c.Required {
		if f == "" {
			return nil, &configError{path: path, err: errors.New("required holds an empty field name")}
		}
	}
	return &c, nil
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
