package queueopen

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/spoolq/spool/batch"
)

// FormatOverride is the batch format one run gives beside its queue's
// spool.conf (spool consume's --format, --delimiter... flags): for each
// key of spool.conf's format (batch.ConfigKeys) that the run sets, its
// value as spool.conf would hold it ("csv", ["*.csv"], {"hash": true}).
// Nil or empty sets nothing.
//
// Its keys are read as strictly as spool.conf's (Check), and it applies
// only where spool.conf sets no format (Apply): replay, fsck, show,
// status and the console read the format from spool.conf alone, so a
// run that read the queue's files otherwise than they do would name,
// count and replay them differently.
type FormatOverride map[string]json.RawMessage

// FormatFlag is the command-line flag of a key of spool.conf's format:
// the key with dashes, and hash-key for "key", since --key is the
// contract's key field.
func FormatFlag(key string) string {
	if key == "key" {
		return "hash-key"
	}
	return strings.ReplaceAll(key, "_", "-")
}

// FormatFlagError is a value of a FormatOverride key that spool.conf
// would refuse, Key "" for a rule between keys (delimiter without csv):
// Err is spool.conf's own error for it. It reads as the flag's.
type FormatFlagError struct {
	Key string
	Err error
}

func (e *FormatFlagError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("format flags: %v", e.Err)
	}
	return fmt.Sprintf("--%s: %v", FormatFlag(e.Key), e.Err)
}
func (e *FormatFlagError) Unwrap() error { return e.Err }

// Check reads each of o's keys as ParseConfig reads spool.conf's
// (batch.Format.Set), so that a bad value is refused before anything is
// opened: the first key wrong, in batch.ConfigKeys' order, as a
// *FormatFlagError. The rules between keys need spool.conf's format
// too: Apply checks them.
func (o FormatOverride) Check() error {
	_, err := o.format()
	return err
}

// format is the Format o's keys give, each checked alone.
func (o FormatOverride) format() (batch.Format, error) {
	var f batch.Format
	for _, key := range batch.ConfigKeys {
		if raw, ok := o[key]; ok {
			if err := f.Set(key, raw); err != nil {
				return f, &FormatFlagError{Key: key, Err: err}
			}
		}
	}
	for key := range o {
		if !slices.Contains(batch.ConfigKeys, key) {
			return f, &FormatFlagError{Key: key, Err: fmt.Errorf("%w: unknown key %q", batch.ErrBadFormat, key)}
		}
	}
	return f, nil
}

// checkFormat is the rule between the format keys, of spool.conf and of
// the flags alike.
func checkFormat(f batch.Format) error {
	if err := f.Check(); err != nil {
		return err
	}
	if f.Kind != "" && f.Kind != batch.JSON || reflect.DeepEqual(f, batch.Format{}) || reflect.DeepEqual(f, batch.Format{Kind: batch.JSON}) {
		return nil
	}
	return errors.New("the json format reads one message per *.json file: set format to jsonl, csv or xml for the other format keys, or leave them out")
}

// Apply returns the queue's configuration as a run with o reads it: file
// (spool.conf as read, nil for none) when o sets nothing; file with o's
// format when file sets no format key (the rules between keys checked
// then, a *FormatFlagError); and file itself when every key o
// sets says what file's format says (its default included: --delimiter
// "," for a csv format without delimiter). A key that says otherwise is
// refused with an invalid *ConfigError naming the file, the key and the
// flag: changing a production queue's format is spool.conf's to say,
// where every tool reads it. file is not changed.
func (o FormatOverride) Apply(file *Config) (*Config, error) {
	if len(o) == 0 {
		return file, nil
	}
	f, err := o.format()
	if err != nil {
		return nil, err
	}
	if file == nil || reflect.DeepEqual(file.Format, batch.Format{}) {
		// The flags alone, under spool.conf's rules between keys.
		if err := checkFormat(f); err != nil {
			return nil, &FormatFlagError{Err: err}
		}
		merged := &Config{Format: f}
		if file != nil {
			c := *file
			c.Format = f
			merged = &c
		}
		return merged, nil
	}
	for _, key := range batch.ConfigKeys {
		if _, ok := o[key]; !ok {
			continue
		}
		want, got := formatValue(file.Format, key), formatValue(f, key)
		if want == got {
			continue
		}
		says := fmt.Sprintf("sets %s %s", key, want)
		if !formatKeySet(file.Format, key) {
			says = fmt.Sprintf("sets the format %s, whose %s is %s", formatValue(file.Format, "format"), key, want)
		}
		return nil, &ConfigError{Path: file.Path, Invalid: true, Err: fmt.Errorf(
			"%s, and --%s says %s: replay, fsck, show, status and the console read the format there; change it in %s, or leave --%s out",
			says, FormatFlag(key), got, ConfigName, FormatFlag(key))}
	}
	return file, nil
}

// format is the batch format c gives, the zero Format for a nil c.
func (c *Config) format() batch.Format {
	if c == nil {
		return batch.Format{}
	}
	return c.Format
}

// formatKeySet reports whether f, as spool.conf set it, sets key.
func formatKeySet(f batch.Format, key string) bool {
	switch key {
	case "format":
		return f.Kind != ""
	case "encoding":
		return f.Encoding != ""
	case "delimiter":
		return f.Delimiter != ""
	case "comment":
		return f.Comment != ""
	case "record":
		return f.Record != ""
	case "include":
		return f.Include != nil
	case "done_file":
		return f.DoneFile != ""
	}
	return f.HashKey // key
}

// formatValue is the value of key in f with its default, as JSON, for
// comparing a flag with spool.conf and for saying either.
func formatValue(f batch.Format, key string) string {
	kind := f.Kind
	if kind == "" {
		kind = batch.JSON
	}
	var v any
	switch key {
	case "format":
		v = kind
	case "encoding":
		v = strings.ToLower(f.Encoding)
		if f.Encoding == "" || strings.EqualFold(f.Encoding, "utf8") {
			v = "utf-8"
		}
	case "delimiter":
		v = f.Delimiter
		if f.Delimiter == "" && kind == batch.CSV {
			v = ","
		}
	case "comment":
		v = f.Comment
	case "record":
		v = f.Record
	case "include":
		v = f.Include
		if f.Include == nil {
			v = []string{"*." + kind}
		}
	case "done_file":
		v = f.DoneFile
	case "key":
		v = map[string]bool{"hash": f.HashKey}
	}
	b, _ := json.Marshal(v) // strings, lists and a map of a bool
	return string(b)
}
