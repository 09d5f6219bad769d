package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"

	"github.com/spoolq/spool/batch"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
)

// configFile returns the spool.conf that says what the contract flags
// given say, then the format flags ff (nil: none), and only that
// (queueopen.NewConfigText); nil when no such flag was given.
func (cf *contractFlags) configFile(ff *formatFlags) ([]byte, error) {
	var f queueopen.FormatOverride
	if ff != nil {
		f = ff.override()
	}
	return queueopen.NewConfigText(cf.override(), f)
}

// writeConfigFile is queueopen.WriteConfig, its refusal of another
// contract worded for the command line.
func writeConfigFile(dir string, data []byte, force bool) (bool, error) {
	wrote, err := queueopen.WriteConfig(dir, data, force)
	var oc *queueopen.OtherContractError
	if errors.As(err, &oc) {
		return false, &cmdline.UsageError{Msg: fmt.Sprintf("%s holds another contract or format than these flags give, and every consumer of the queue reads it. Try: spool check %s to see it, or --force to replace it", oc.Path, dir)}
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
	fs.StringVar(&f.encoding, "encoding", "", "with --format: the files' WHATWG encoding `LABEL` (utf-8, windows-1252, shift_jis, euc-kr, gb18030, utf-16le...)")
	fs.StringVar(&f.include, "include", "", "with --format: which names of inbox/ are files of the queue, comma-separated `PATTERNS` (*.csv,*.csv.gz)")
	fs.StringVar(&f.delimiter, "delimiter", "", "with --format csv: the field `CHAR` (default ,)")
	fs.StringVar(&f.comment, "comment", "", "with --format csv: lines starting with `CHAR` are comments")
	fs.StringVar(&f.record, "record", "", "with --format xml: the `ELEMENT` each record is")
	fs.StringVar(&f.done, "done-file", "", "with --format: take a file only once its done-file `PATTERN` exists ({name}.done)")
	fs.BoolVar(&f.hashKey, "hash-key", false, "with --format: key each record by the SHA-256 of its fields, for records without a key field")
	return f
}

// override is the format flags given as the keys of spool.conf they set,
// for the library to check, apply or write (queueopen.FormatOverride);
// nil when none was given.
func (f *formatFlags) override() queueopen.FormatOverride {
	var o queueopen.FormatOverride
	for _, k := range batch.ConfigKeys {
		if !cmdline.Given(f.fs, queueopen.FormatFlag(k)) {
			continue
		}
		var v any
		switch k {
		case "include":
			v = splitList(f.include)
		case "key":
			v = map[string]bool{"hash": f.hashKey}
		default:
			v = map[string]string{"format": f.format, "encoding": f.encoding, "delimiter": f.delimiter,
				"comment": f.comment, "record": f.record, "done_file": f.done}[k]
		}
		if o == nil {
			o = queueopen.FormatOverride{}
		}
		o[k], _ = json.Marshal(v) // strings, a list, a map of a bool
	}
	return o
}
