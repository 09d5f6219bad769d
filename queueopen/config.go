package queueopen

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/batch"
	"github.com/spoolq/spool/internal/spelling"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/task"
)

// ConfigName is the queue's configuration file, DIR/spool.conf: a JSON
// object with the keys key_field, order_field, seq_field, amount_field,
// required, max_size and headers (the fields of the schema version, trace
// context and tenant), each optional, and approval (the approval policy a
// ledger adopts once: spool policy). For example:
//
//	{"key_field": "event_id", "order_field": "account", "required": ["event_id"]}
//
// It is read strictly (ParseConfig): a key in another case, a repeated or
// unknown key, "" or null for a value is a configuration error, not a
// default, because each would change the idempotency key unnoticed.
const ConfigName = "spool.conf"

// Config is what a spool.conf says, and only that: a key it leaves out is
// "" (or nil, or 0) in Contract, for Resolve to fill with the default.
type Config struct {
	// Path is the file's path.
	Path string
	// Contract holds the contract keys the file set.
	Contract spool.Contract
	// Approval is the approval policy as written, checked by
	// task.ParsePolicy; nil when the file has none.
	Approval json.RawMessage
	// Format is how the queue's files are read (batch.ConfigKeys: format,
	// encoding, include, done_file, key...), checked; the zero value,
	// when the file sets none of them, is one JSON message per *.json
	// file, as ever.
	Format batch.Format
}

// ConfigError is a spool.conf that cannot be used: not a regular file,
// unreadable, or not what ParseConfig accepts. Err says why.
type ConfigError struct {
	Path string
	Err  error
	// Invalid is true when the file was read, and what it says is
	// refused; false when it could not be read.
	Invalid bool
}

func (e *ConfigError) Error() string { return fmt.Sprintf("config %s: %v", e.Path, e.Err) }
func (e *ConfigError) Unwrap() error { return e.Err }

// Override changes a queue's contract for one program, over what its
// spool.conf says (the command line's contract flags). A nil field, or a
// nil Required, keeps the file's value or the default.
type Override struct {
	KeyField, OrderField, SeqField, AmountField *string
	// Required, when not nil, replaces the required fields; an empty
	// list requires the key alone.
	Required []string
	MaxSize  *int64
}

// ReadConfig reads the spool.conf of the queue at dir; nil, nil when there
// is none. Every problem is a *ConfigError naming the file: a contract
// that differs from what the operator wrote changes the idempotency key
// without a word.
func ReadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, ConfigName)
	data, err := readRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &ConfigError{Path: path, Err: err}
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, &ConfigError{Path: path, Err: err, Invalid: true}
	}
	c.Path = path
	return c, nil
}

// LoadContract returns the contract of the queue at dir, as every
// consumer of it must run: ReadConfig, then Resolve with o. The Config is
// nil when the queue has no spool.conf.
func LoadContract(dir string, o Override) (spool.Contract, *Config, error) {
	file, err := ReadConfig(dir)
	if err != nil {
		return spool.DefaultContract(), nil, err
	}
	c, err := file.Resolve(o)
	return c, file, err
}

// Resolve returns the contract of the defaults, then the file's keys (a
// nil Config has none), then o's, checked (spool.Contract.Check). When
// neither the file nor o list the required fields, they are the four
// role fields under their final names, so renaming a field does not
// leave the old name required.
func (file *Config) Resolve(o Override) (spool.Contract, error) {
	c := spool.DefaultContract()
	var required []string
	if file != nil {
		f := file.Contract
		c.KeyField = cmp.Or(f.KeyField, c.KeyField)
		c.OrderField = cmp.Or(f.OrderField, c.OrderField)
		c.SeqField = cmp.Or(f.SeqField, c.SeqField)
		c.AmountField = cmp.Or(f.AmountField, c.AmountField)
		required = f.Required
		if f.MaxSize != 0 {
			c.MaxSize = f.MaxSize
		}
		c.Headers = f.Headers
	}
	for _, s := range []struct{ to, from *string }{
		{&c.KeyField, o.KeyField}, {&c.OrderField, o.OrderField}, {&c.SeqField, o.SeqField}, {&c.AmountField, o.AmountField},
	} {
		if s.from != nil {
			*s.to = *s.from
		}
	}
	if o.Required != nil {
		required = o.Required
	}
	if o.MaxSize != nil {
		c.MaxSize = *o.MaxSize
	}
	if required != nil {
		c.Required = required
	} else {
		c.Required = []string{c.KeyField, c.OrderField, c.SeqField, c.AmountField}
	}
	if err := c.Check(); err != nil {
		if file != nil {
			return c, fmt.Errorf("contract from %s and flags: %w", file.Path, err)
		}
		return c, fmt.Errorf("contract: %w", err)
	}
	return c, nil
}

// configKeys are the contract's keys of spool.conf, in the order the
// errors list them.
var configKeys = []string{"key_field", "order_field", "seq_field", "amount_field", "required", "max_size", "headers"}

// approvalKey is spool.conf's one key beside the contract's: the approval
// policy of replays and discards (task.ParsePolicy).
const approvalKey = "approval"

// ParseConfig decodes spool.conf strictly: one JSON object of valid UTF-8,
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
func ParseConfig(data []byte) (*Config, error) {
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
	c := &Config{}
	seen := make(map[string]bool, len(configKeys))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxError(dec, err)
		}
		key := tok.(string) // the decoder gives only strings as object keys
		if !slices.Contains(configKeys, key) && key != approvalKey && !slices.Contains(batch.ConfigKeys, key) {
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
	if err := checkFormat(c.Format); err != nil {
		return nil, err
	}
	return c, nil
}

// setConfigKey checks one value of spool.conf and sets it in cf.
func setConfigKey(cf *Config, key string, raw json.RawMessage) error {
	c := &cf.Contract
	kind := batch.JSONKind(raw)
	if kind == "null" {
		return fmt.Errorf("%s is null: give a value, or leave %s out for the default", key, key)
	}
	if key == "key" && kind == "a string" {
		// "key": "id" is the contract's key_field mistyped far more often
		// than the batch format's "key", which is an object.
		return fmt.Errorf(`unknown key "key": the keys are %s; did you mean "key_field"? ("key" is the batch format's {"hash": true})`,
			strings.Join(configKeys, ", "))
	}
	if slices.Contains(batch.ConfigKeys, key) {
		// The format's keys, read by package batch as strictly.
		return cf.Format.Set(key, raw)
	}
	switch key {
	case approvalKey:
		// The approval policy, not the contract: checked here with the
		// rest of the file.
		if _, err := task.ParsePolicy(raw); err != nil {
			return err
		}
		cf.Approval = raw
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
			if k := batch.JSONKind(e); k != "a string" {
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
	keys := append(append(slices.Clone(configKeys), approvalKey), batch.ConfigKeys...)
	for _, k := range keys {
		if strings.EqualFold(k, key) {
			return fmt.Errorf("unknown key %q: keys are case-sensitive, did you mean %q?", key, k)
		}
	}
	for _, k := range keys {
		// A letter missing, doubled, swapped or wrong, or the underscore.
		if spelling.Distance(k, key) <= 2 {
			return fmt.Errorf("unknown key %q: did you mean %q? The keys are %s", key, k, strings.Join(keys, ", "))
		}
	}
	return fmt.Errorf("unknown key %q: the keys are %s", key, strings.Join(keys, ", "))
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

// maxConfigSize bounds what readRegular reads of spool.conf: a contract
// is a few hundred bytes; a file of megabytes is a mistake.
const maxConfigSize = 1 << 20

// readRegular reads the regular file at path, refusing anything else
// without blocking: a FIFO is opened non-blocking and refused (a plain
// read would wait for a writer forever, hanging a nightly fsck), a
// symlink is followed as a path would be, a directory or device refused.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("is a %s, not a regular file", queue.ModeType(fi.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("larger than %d bytes: not a contract", maxConfigSize)
	}
	return data, nil
}

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
		if k := batch.JSONKind(v); k != "a string" {
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

// Batch returns what reads the batch files of the queue d, whose
// spool.conf file sets a format other than json, for spool.Config.Batch,
// and sets d's message names by the format (UseFormat). For a queue of
// JSON messages (no spool.conf, or no format) it returns nil and leaves d
// as it is.
func Batch(d *queue.Dir, file *Config, c spool.Contract) (spool.BatchFiles, error) {
	UseFormat(d, file)
	if !batched(file) {
		return nil, nil
	}
	files, err := batch.Files(file.Format, c)
	if err != nil {
		return nil, &ConfigError{Path: file.Path, Err: err, Invalid: true}
	}
	return files, nil
}

// Batched reports whether c, a queue's spool.conf (nil for none), sets a
// format of batch files.
func (c *Config) Batched() bool { return batched(c) }

// batched reports whether file sets a format of batch files.
func batched(file *Config) bool {
	return file != nil && file.Format.Kind != "" && file.Format.Kind != batch.JSON
}

// UseFormat makes the names of d's messages those of the format file
// sets, for every program that lists the queue's stages (consume, fsck,
// show, status, replay): in inbox/ a name the format includes, once its
// done-file is there (batch.Format.Includes, DoneName), and in the other
// stages a name it includes, so that its record dead letters
// (orders~L17.csv) count as the messages they are. With done_file it
// also names the done-files of inbox/, and those whose data file is not
// there, for the stage counts (queue.Dir.SetDoneFiles). For a queue of JSON
// messages it leaves d as it is (ParseConfig refuses the other format
// keys without a format, since they would change nothing).
func UseFormat(d *queue.Dir, file *Config) {
	if !batched(file) {
		return
	}
	f := file.Format
	inbox := d.StagePath(queue.Inbox)
	d.SetMessageNames(func(s queue.Stage, name string) bool {
		if !f.Includes(name) {
			return false
		}
		done := f.DoneName(name)
		if s != queue.Inbox || done == "" || batch.IsDeadLetterName(name) {
			return true
		}
		_, err := os.Lstat(filepath.Join(inbox, done))
		return err == nil
	}, f.IncludesRule())
	if f.DoneFile == "" {
		return
	}
	d.SetAnnouncer(f.AnnouncedBy)
	d.SetDoneFiles(func(name string) (done, orphan bool) {
		data, ok := f.DataName(name)
		if !ok {
			return false, false
		}
		if !f.Includes(data) {
			return true, true // announces a file spool never reads
		}
		_, err := os.Lstat(filepath.Join(inbox, data))
		return true, errors.Is(err, fs.ErrNotExist)
	})
}
