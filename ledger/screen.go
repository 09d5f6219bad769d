package ledger

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/spoolq/spool"
)

// The ledger's screen of what one delivery may bring to a statement. A
// value that an index or a column of some engine cannot take fails the
// whole statement, and so the whole batch, on every attempt; or, under
// MariaDB's INSERT IGNORE, is cut short without a word. Contract.Parse
// keeps messages within spool.MaxKeyLen and spool.MaxAmountLen on every
// engine before the ledger sees them; this screen is the defence for
// library callers that build deliveries themselves: a message it refuses
// becomes a dead letter, as Parse would have made it, and a delivery
// whose own identity (claim, reason) does not fit is the caller's error.

// screenKeys returns batch with each valid message that the engine cannot
// keep as it is (keyReject) replaced by a dead letter of it
// (invalid-field), so that no key is ever cut short into another
// message's and no batch fails for one message; batch itself when there
// is none.
func (db *DB) screenKeys(batch []*spool.Delivery) []*spool.Delivery {
	var out []*spool.Delivery
	for i, d := range batch {
		if d.Message == nil {
			if d.Reject != nil && tooLongKey(db.dialect.MaxKey(), d.Reject.MsgID) {
				// A dead letter keeps the msg_id it carried only when
				// the engine can key it.
				if out == nil {
					out = slices.Clone(batch)
				}
				c, rej := *d, *d.Reject
				rej.MsgID, c.Reject = "", &rej
				out[i] = &c
			}
			continue
		}
		rej := db.keyReject(d.Message)
		if rej == nil {
			continue
		}
		if out == nil {
			out = slices.Clone(batch)
		}
		c := *d
		c.Message, c.Reject = nil, rej
		out[i] = &c
	}
	if out == nil {
		return batch
	}
	return out
}

// tooLongKey reports whether key is longer than limit, an engine's
// MaxKey (0 for none).
func tooLongKey(limit int, key string) bool { return limit > 0 && len(key) > limit }

// keyReject says why m cannot be recorded as it is, nil when it can: a
// msg_id longer than the engine keeps as a key (Dialect.MaxKey), or an
// order key or an amount longer than the contract allows
// (spool.MaxKeyLen, spool.MaxAmountLen), which no engine is promised to
// keep whole (MariaDB's columns for them are BLOBs of 65 535 bytes).
func (db *DB) keyReject(m *spool.Message) *spool.RejectError {
	if limit := db.dialect.MaxKey(); tooLongKey(limit, m.MsgID) {
		return &spool.RejectError{Reason: spool.ReasonInvalidField, Field: "msg_id",
			Detail: fmt.Sprintf("msg_id of %d bytes: a %s ledger keeps keys of at most %d bytes", len(m.MsgID), db.dialect.Name(), limit)}
	}
	if len(m.OrderNo) > spool.MaxKeyLen {
		return &spool.RejectError{Reason: spool.ReasonInvalidField, Field: "order_no",
			Detail: fmt.Sprintf("must be at most %d bytes, found %d bytes", spool.MaxKeyLen, len(m.OrderNo))}
	}
	if len(m.Amount) > spool.MaxAmountLen {
		return &spool.RejectError{Reason: spool.ReasonInvalidField, Field: "amount",
			Detail: fmt.Sprintf("must be at most %d bytes, found %d bytes", spool.MaxAmountLen, len(m.Amount))}
	}
	return nil
}

// checkKey refuses a message that screenKeys would dead-letter
// (keyReject), where a delivery cannot be made a dead letter instead.
func (db *DB) checkKey(d *spool.Delivery) error {
	if d.Message == nil {
		return nil
	}
	if rej := db.keyReject(d.Message); rej != nil {
		return fmt.Errorf("%w: %s: %s: %s", ErrBadDelivery, d.File, rej.Field, rej.Detail)
	}
	return nil
}

// checkDelivery refuses a delivery that is not one: the caller's error,
// for which the whole call fails and nothing is written. Its claim is a
// key (UNIQUE in deliveries), bounded like a msg_id by Dialect.MaxKey, and
// its reason is indexed on some engines, bounded by spool.MaxKeyLen (the
// package's reasons are a few bytes).
func (db *DB) checkDelivery(d *spool.Delivery) error {
	switch {
	case d == nil:
		return fmt.Errorf("%w: nil", ErrBadDelivery)
	case d.Claim == "":
		return fmt.Errorf("%w: %s: empty claim", ErrBadDelivery, d.File)
	case (d.Message == nil) == (d.Reject == nil):
		return fmt.Errorf("%w: %s: want exactly one of message and reject", ErrBadDelivery, d.File)
	case d.Message != nil && d.Message.MsgID == "":
		return fmt.Errorf("%w: %s: empty msg_id", ErrBadDelivery, d.File)
	case d.Reject != nil && d.Reject.Reason == "":
		return fmt.Errorf("%w: %s: rejected without a reason", ErrBadDelivery, d.File)
	case d.Reject != nil && len(d.Reject.Reason) > spool.MaxKeyLen:
		return fmt.Errorf("%w: %s: reason of %d bytes, over %d", ErrBadDelivery, d.File, len(d.Reject.Reason), spool.MaxKeyLen)
	}
	if limit := db.dialect.MaxKey(); limit > 0 && len(d.Claim) > limit {
		return fmt.Errorf("%w: %s: claim of %d bytes: a %s ledger keeps keys of at most %d bytes",
			ErrBadDelivery, d.File, len(d.Claim), db.dialect.Name(), limit)
	}
	return nil
}

// cut returns the descriptive text s (already clean) cut to at most n
// bytes at a rune boundary, "..." marking the cut: a dead letter's field
// and detail from a library caller are unbounded, and MariaDB's TEXT holds
// 65 535 bytes.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
