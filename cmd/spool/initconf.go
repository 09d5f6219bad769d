package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
)

// configFile returns the spool.conf that says what the contract flags
// given say, then the format flags ff (nil: none), and only that
// (queueopen.ConfigText); nil when no such flag was given.
func (cf *contractFlags) configFile(ff *formatFlags) ([]byte, error) {
	var keys []queueopen.ConfigKey
	for _, k := range []struct {
		flag, key string
		value     func() any
	}{
		{"key", "key_field", func() any { return cf.key }},
		{"order-key", "order_field", func() any { return cf.order }},
		{"seq", "seq_field", func() any { return cf.seq }},
		{"amount", "amount_field", func() any { return cf.amount }},
		{"require", "required", func() any { return splitList(cf.require) }},
		{"max-size", "max_size", func() any { return cf.maxSize.N }},
	} {
		if cmdline.Given(cf.fs, k.flag) {
			keys = append(keys, queueopen.ConfigKey{Key: k.key, Value: k.value()})
		}
	}
	if ff != nil {
		keys = append(keys, ff.keys()...)
	}
	return queueopen.ConfigText(keys)
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

// formatFlags are init's flags of a queue of batch files: each writes
// the spool.conf key of the same name (docs/DESIGN.md, "Batch files").
type formatFlags struct {
	fs                                                          *flag.FlagSet
	format, encoding, include, delimiter, comment, record, done string
	hashKey                                                     bool
}

// addFormatFlags registers the format flags on fs.
func addFormatFlags(fs *flag.FlagSet) *formatFlags {
	f := &formatFlags{fs: fs}
	fs.StringVar(&f.format, "format", "", "the queue's files: `KIND` json (a message a file, the default), jsonl, csv or xml (spool.conf's format)")
	fs.StringVar(&f.encoding, "encoding", "", "with --format: the files' WHATWG encoding `LABEL` (utf-8, windows-1252, shift_jis, euc-kr, gb18030...)")
	fs.StringVar(&f.include, "include", "", "with --format: which names of inbox/ are files of the queue, comma-separated `PATTERNS` (*.csv,*.csv.gz)")
	fs.StringVar(&f.delimiter, "delimiter", "", "with --format csv: the field `CHAR` (default ,)")
	fs.StringVar(&f.comment, "comment", "", "with --format csv: lines starting with `CHAR` are comments")
	fs.StringVar(&f.record, "record", "", "with --format xml: the `ELEMENT` each record is")
	fs.StringVar(&f.done, "done-file", "", "with --format: take a file only once its done-file `PATTERN` exists ({name}.done)")
	fs.BoolVar(&f.hashKey, "hash-key", false, "with --format: key each record by the SHA-256 of its fields, for records without a key field")
	return f
}

// keys are the spool.conf keys of the format flags given, in the order
// spool.conf's documentation lists them.
func (f *formatFlags) keys() []queueopen.ConfigKey {
	var out []queueopen.ConfigKey
	add := func(flag, key string, v any) {
		if cmdline.Given(f.fs, flag) {
			out = append(out, queueopen.ConfigKey{Key: key, Value: v})
		}
	}
	add("format", "format", f.format)
	add("encoding", "encoding", f.encoding)
	add("include", "include", splitList(f.include))
	add("delimiter", "delimiter", f.delimiter)
	add("comment", "comment", f.comment)
	add("record", "record", f.record)
	add("done-file", "done_file", f.done)
	add("hash-key", "key", map[string]bool{"hash": f.hashKey})
	return out
}
