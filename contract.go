package spool

import (
	"errors"
	"fmt"
)

// Default field names and limits of the message contract (docs/DESIGN.md,
// "The message contract").
const (
	DefaultKeyField    = "msg_id"
	DefaultOrderField  = "order_no"
	DefaultSeqField    = "seq"
	DefaultAmountField = "amount"
	// DefaultMaxSize is the largest message accepted, in bytes (1 MiB).
	DefaultMaxSize int64 = 1 << 20
	// MaxDepth is how deeply arrays and objects may nest before a message is
	// a parse error; it keeps a hostile file from costing unbounded stack.
	MaxDepth = 512
	// MaxKeyLen is the longest idempotency key or ordering key a message
	// may carry, in bytes of its decoded text (of its digits, for an
	// integer key); a longer one is invalid-field. The keys are index
	// keys in every ledger, and each engine caps those: MariaDB's key
	// columns are VARBINARY(1024), and PostgreSQL fails the whole
	// statement, so the whole batch, on a btree entry over 2 704 bytes (a
	// third of a page). The limit is the narrowest engine's, the same on
	// every engine, so that a message is valid or not whatever ledger it
	// meets, checked by Parse before any ledger sees it. An emitted event's
	// aggregate (Emit) is a key of the outbox's indexes and has this limit
	// too.
	MaxKeyLen = 1024
	// MaxAmountLen is the longest amount, in bytes of its text: far past
	// any money, and within every ledger's column for it (MariaDB's BLOB
	// holds 65 535 bytes, and its INSERT IGNORE would cut a longer amount
	// short rather than fail), so that an amount is always stored exactly
	// as it was sent.
	MaxAmountLen = 1024
)

// Contract says what a valid message looks like: which fields play which
// role, which are required, and how large a file may be. The zero value is
// not usable; start from DefaultContract.
type Contract struct {
	// KeyField is the idempotency key: a non-empty string or an integer,
	// of at most MaxKeyLen bytes.
	KeyField string `json:"key_field"`
	// OrderField is the ordering key: a non-empty string or an integer,
	// of at most MaxKeyLen bytes.
	OrderField string `json:"order_field"`
	// SeqField is the sequence within the order: an integer >= 1.
	SeqField string `json:"seq_field"`
	// AmountField is money: a JSON number or a string in JSON number syntax,
	// kept exactly as written, of at most MaxAmountLen bytes.
	AmountField string `json:"amount_field"`
	// Required lists the fields that must be present and not null. The key
	// field is always required, listed or not: without it there is no
	// idempotency.
	Required []string `json:"required"`
	// MaxSize is the largest message in bytes; larger files are dead-lettered
	// as too-large without being read. Zero means DefaultMaxSize.
	MaxSize int64 `json:"max_size"`
	// Headers names the fields carrying the schema version, the W3C trace
	// context and the tenant; the zero value names none.
	Headers HeaderFields `json:"headers,omitzero"`
}

// DefaultContract returns the default contract (docs/DESIGN.md, "The message
// contract"): msg_id, order_no, seq and amount, all required, 1 MiB at most.
func DefaultContract() Contract {
	return Contract{
		KeyField:    DefaultKeyField,
		OrderField:  DefaultOrderField,
		SeqField:    DefaultSeqField,
		AmountField: DefaultAmountField,
		Required:    []string{DefaultKeyField, DefaultOrderField, DefaultSeqField, DefaultAmountField},
		MaxSize:     DefaultMaxSize,
	}
}

// KeyOf returns the key field's value of data, and true, when data is one
// JSON object whose key field is present and valid by the rules Parse
// applies to it, whatever else is wrong with the message (a required
// field missing, another field invalid); "" and false otherwise, and for
// a contract without a key field. The consumer records it with a message
// it dead-letters, so that the message can be found by its key: it is
// Parse under a contract of the key field alone, so the key's rules are
// Parse's own.
func (c Contract) KeyOf(data []byte) (string, bool) {
	if c.KeyField == "" {
		return "", false
	}
	m, err := Contract{KeyField: c.KeyField, MaxSize: c.MaxSize}.Parse(data)
	if err != nil {
		return "", false
	}
	return m.MsgID, true
}

// ErrBadContract is wrapped by Contract.Check for a contract that cannot work.
var ErrBadContract = errors.New("bad contract")

// Check reports a contract that cannot be used: empty or clashing field
// names (a header field may not be a role field or another header's), or a
// negative size limit.
func (c Contract) Check() error {
	roles := map[string]string{}
	for _, r := range []struct{ role, name string }{
		{"key field", c.KeyField}, {"order field", c.OrderField},
		{"seq field", c.SeqField}, {"amount field", c.AmountField},
	} {
		if r.name == "" {
			return fmt.Errorf("%w: %s is empty", ErrBadContract, r.role)
		}
		if other, ok := roles[r.name]; ok {
			return fmt.Errorf("%w: %s and %s are both %q", ErrBadContract, other, r.role, r.name)
		}
		roles[r.name] = r.role
	}
	if err := c.Headers.check(roles); err != nil {
		return err
	}
	for _, f := range c.Required {
		if f == "" {
			return fmt.Errorf("%w: empty name in required fields", ErrBadContract)
		}
	}
	if c.MaxSize < 0 {
		return fmt.Errorf("%w: max size %d is negative", ErrBadContract, c.MaxSize)
	}
	return nil
}

// Limit returns the size limit in bytes, applying the default for zero.
func (c Contract) Limit() int64 {
	if c.MaxSize == 0 {
		return DefaultMaxSize
	}
	return c.MaxSize
}
