package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/queue"
)

// contractRecord is what a consumer records of its contract in the
// queue's queue.ContractFile: the contract in spool.conf's keys and its
// hash, which is what two consumers compare.
type contractRecord struct {
	Hash     string         `json:"hash"`
	Contract spool.Contract `json:"contract"`
}

// recordContract returns c's record, one line of JSON. Required is
// compared as a set: its order means nothing.
func recordContract(c spool.Contract) ([]byte, error) {
	c.Required = slices.Sorted(slices.Values(c.Required))
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("record contract: %w", err)
	}
	sum := sha256.Sum256(body)
	b, err := json.Marshal(contractRecord{Hash: "sha256:" + hex.EncodeToString(sum[:]), Contract: c})
	if err != nil {
		return nil, fmt.Errorf("record contract: %w", err)
	}
	return append(b, '\n'), nil
}

// holdContract makes this consumer one of d's live consumers under c, or
// refuses (exit 2) when consumers alive now run another contract, naming
// the keys that differ: two consumers of one queue with different keys
// would dead-letter or double-process each other's messages.
func holdContract(d *queue.Dir, c spool.Contract) (*queue.ContractHold, error) {
	rec, err := recordContract(c)
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
		return nil, &usageError{msg: fmt.Sprintf("consumers of %s are running with a contract this spool cannot read (%s/%s): stop them first", d.Path(), d.Path(), queue.ContractFile)}
	}
	return nil, &usageError{msg: fmt.Sprintf("consumers of %s are running with another contract: %s; stop them, or give this one the same spool.conf and contract flags",
		d.Path(), strings.Join(contractDiff(live.Contract, c), ", "))}
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
		out = append(out, "the same keys, another hash")
	}
	return out
}
