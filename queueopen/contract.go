package queueopen

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/batch"
	"github.com/spoolq/spool/queue"
)

// ContractError is HoldContract's refusal: consumers alive now run the
// queue under another contract. Two consumers of one queue with
// different keys would dead-letter or double-process each other's
// messages, so the second is refused before it claims anything.
type ContractError struct {
	// Queue is the queue directory's path.
	Queue string
	// Diff lists the keys that differ, `key_field "msg_id" running,
	// "event_id" here`; nil when the running contract is unreadable (a
	// newer spool wrote it).
	Diff []string
}

func (e *ContractError) Error() string {
	if e.Diff == nil {
		return fmt.Sprintf("consumers of %s are running with a contract this spool cannot read (%s/%s): stop them first", e.Queue, e.Queue, queue.ContractFile)
	}
	return fmt.Sprintf("consumers of %s are running with another contract: %s; stop them, or give this one the same spool.conf and contract flags",
		e.Queue, strings.Join(e.Diff, ", "))
}

// contractRecord is what a consumer records of its contract in the
// queue's queue.ContractFile: the contract in spool.conf's keys, the
// queue's format of batch files when it has one, and their hash, which is
// what two consumers compare.
type contractRecord struct {
	Hash     string         `json:"hash"`
	Contract spool.Contract `json:"contract"`
	Format   *formatRecord  `json:"format,omitempty"`
}

// formatRecord is a batch format in spool.conf's keys.
type formatRecord struct {
	Kind      string   `json:"format"`
	Encoding  string   `json:"encoding,omitempty"`
	Delimiter string   `json:"delimiter,omitempty"`
	Comment   string   `json:"comment,omitempty"`
	Record    string   `json:"record,omitempty"`
	Include   []string `json:"include,omitempty"`
	DoneFile  string   `json:"done_file,omitempty"`
	HashKey   bool     `json:"hash_key,omitempty"`
}

// recordOf is f's record; nil for a queue of JSON messages, whose record
// holds the contract alone, as it did before batch files.
func recordOf(f batch.Format) *formatRecord {
	if f.Kind == "" || f.Kind == batch.JSON {
		return nil
	}
	// One encoding whatever its label: cp949 and euc-kr, utf8 and the
	// default, are one format.
	enc := f.Encoding
	if name, err := batch.EncodingName(enc); err == nil {
		enc = name
		if enc == "utf-8" {
			enc = "" // as the default is recorded
		}
	}
	return &formatRecord{Kind: f.Kind, Encoding: enc, Delimiter: f.Delimiter, Comment: f.Comment,
		Record: f.Record, Include: f.Include, DoneFile: f.DoneFile, HashKey: f.HashKey}
}

// recordContract returns the record of c and the queue's format f, one
// line of JSON. Required is compared as a set: its order means nothing.
func recordContract(c spool.Contract, f batch.Format) ([]byte, error) {
	c.Required = slices.Sorted(slices.Values(c.Required))
	rec := contractRecord{Contract: c, Format: recordOf(f)}
	hashed := any(c)
	if rec.Format != nil {
		hashed = []any{c, rec.Format}
	}
	body, err := json.Marshal(hashed)
	if err != nil {
		return nil, fmt.Errorf("record contract: %w", err)
	}
	sum := sha256.Sum256(body)
	rec.Hash = "sha256:" + hex.EncodeToString(sum[:])
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("record contract: %w", err)
	}
	return append(b, '\n'), nil
}

// HoldContract makes the caller one of d's live consumers under c and the
// queue's format f (the zero Format for JSON messages), or refuses with a
// *ContractError when consumers alive now run another contract or another
// format: they would read each other's files otherwise, or not at all.
// The hold lasts until its Close (or the process's end). Open holds the
// contract itself for Consume.
func HoldContract(d *queue.Dir, c spool.Contract, f batch.Format) (*queue.ContractHold, error) {
	rec, err := recordContract(c, f)
	if err != nil {
		return nil, err
	}
	h, err := d.HoldContract(rec)
	var de *queue.ContractDiffersError
	if !errors.As(err, &de) {
		return h, err
	}
	var live contractRecord
	if jerr := json.Unmarshal(de.Live, &live); jerr != nil {
		return nil, &ContractError{Queue: d.Path()}
	}
	diff := contractDiff(live.Contract, c)
	if lf, hf := live.Format, recordOf(f); !reflect.DeepEqual(lf, hf) {
		name := func(r *formatRecord) []byte {
			if r == nil {
				return []byte(`"json"`)
			}
			b, _ := json.Marshal(r)
			return b
		}
		if len(diff) == 1 && diff[0] == sameKeysOtherHash {
			diff = nil
		}
		diff = append(diff, fmt.Sprintf("format %s running, %s here", name(lf), name(hf)))
	}
	return nil, &ContractError{Queue: d.Path(), Diff: diff}
}

// sameKeysOtherHash is the difference of two records whose contracts'
// keys are equal.
const sameKeysOtherHash = "the same keys, another hash"

// sameContract reports whether a and b are one contract (Required
// compared as a set).
func sameContract(a, b spool.Contract) bool {
	ra, errA := recordContract(a, batch.Format{})
	rb, errB := recordContract(b, batch.Format{})
	return errA == nil && errB == nil && string(ra) == string(rb)
}

// contractDiff lists the keys in which the live contract and this one
// differ: `key_field "msg_id" running, "event_id" here`.
func contractDiff(live, here spool.Contract) []string {
	var out []string
	add := func(key string, a, b any) {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			out = append(out, fmt.Sprintf("%s %s running, %s here", key, ja, jb))
		}
	}
	add("key_field", live.KeyField, here.KeyField)
	add("order_field", live.OrderField, here.OrderField)
	add("seq_field", live.SeqField, here.SeqField)
	add("amount_field", live.AmountField, here.AmountField)
	add("required", slices.Sorted(slices.Values(live.Required)), slices.Sorted(slices.Values(here.Required)))
	add("max_size", live.MaxSize, here.MaxSize)
	add("headers", live.Headers, here.Headers)
	if len(out) == 0 {
		out = append(out, sameKeysOtherHash)
	}
	return out
}

// Consumer returns a consumer of q (spool.NewConsumer) under the queue's
// contract, q.Contract, which Open read from spool.conf and, for Consume,
// holds among the live consumers'. cfg.Contract is left zero for it, or
// must be the same contract: a program that parsed messages with other
// keys than the consumers beside it would dead-letter or double-process
// theirs.
func (q *Queue) Consumer(cfg spool.Config) (*spool.Consumer, error) {
	switch {
	case reflect.DeepEqual(cfg.Contract, spool.Contract{}):
		cfg.Contract = q.Contract
	case !sameContract(cfg.Contract, q.Contract):
		return nil, fmt.Errorf("consumer of %s: %w: its Config.Contract is not the queue's (%s): leave it zero, or change %s",
			q.Dir.Path(), spool.ErrBadContract, strings.Join(contractDiff(q.Contract, cfg.Contract), ", "), ConfigName)
	}
	if cfg.Batch == nil {
		// The queue's format, from its spool.conf: batch files, or nil.
		b, err := Batch(q.Dir, q.Config, q.Contract)
		if err != nil {
			return nil, err
		}
		cfg.Batch = b
	}
	return spool.NewConsumer(q.Dir, q.Ledger.Consumer(), cfg)
}
