package report

import (
	"context"
	"fmt"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// ReplayCandidate is a dead letter considered for a replay, with what the
// ledger says of its message.
type ReplayCandidate struct {
	ErrorRow
	// Key is the message's idempotency key: the one in the file under the
	// queue's contract (an operator may have edited the file in error/
	// before replaying it), else the one the ledger recorded; empty when
	// neither has one (not JSON, no key, not a regular file, too large).
	Key string
	// OrderNo is the message's ordering key read from the file under the
	// queue's contract; empty when the file has none (or none valid).
	OrderNo string
	// Processed reports that processed already holds Key: the message was
	// delivered again and processed since it failed, so a replay would
	// only be absorbed as a duplicate (or flagged as a conflict, if the
	// bodies differ).
	Processed bool
}

// ReplayPlan finds the key of each dead letter in rows (from Errors) and
// whether the ledger already processed it. It reads files in error/ the
// way schema inference reads inbox/: without following links, opening
// FIFOs or reading past c's size limit; it moves nothing.
func ReplayPlan(ctx context.Context, d *queue.Dir, l *ledger.DB, c spool.Contract, rows []ErrorRow) ([]ReplayCandidate, error) {
	out := make([]ReplayCandidate, len(rows))
	keys := make([]string, 0, len(rows))
	for i, r := range rows {
		key, order := fileKey(d, c, r)
		out[i] = ReplayCandidate{ErrorRow: r, Key: key, OrderNo: order}
		if out[i].Key == "" {
			out[i].Key = r.MsgID
		}
		if out[i].Key != "" {
			keys = append(keys, out[i].Key)
		}
	}
	done, err := l.Messages().ProcessedIDs(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("replay plan: %w", err)
	}
	for i := range out {
		out[i].Processed = out[i].Key != "" && done[out[i].Key]
	}
	return out, nil
}

// fileKey reads the idempotency key and the ordering key from a dead
// letter's content, each "" when it has none. Only the key is checked:
// the message failed for some other reason, and may have failed on
// another field (an ordering key that is not valid is left out).
func fileKey(d *queue.Dir, c spool.Contract, r ErrorRow) (key, order string) {
	if r.entry.Name == "" {
		return "", ""
	}
	data, err := d.ReadEntry(queue.Error, r.entry, c.Limit())
	if err != nil {
		// Gone, not regular, too large or unreadable: no key to look up.
		// The replay itself reports a file that is gone.
		return "", ""
	}
	if m, err := (spool.Contract{KeyField: c.KeyField, OrderField: c.OrderField, MaxSize: c.MaxSize}).Parse(data); err == nil {
		return m.MsgID, m.OrderNo
	}
	m, err := spool.Contract{KeyField: c.KeyField, MaxSize: c.MaxSize}.Parse(data)
	if err != nil {
		return "", ""
	}
	return m.MsgID, ""
}
