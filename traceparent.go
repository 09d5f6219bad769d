package spool

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// TraceContext is a parsed W3C Trace Context traceparent (docs/DESIGN.md,
// "Headers", says what spool does with it): version 00, a
// 16-byte trace-id, an 8-byte parent-id (the caller's span) and the
// trace-flags.
type TraceContext struct {
	TraceID  [16]byte
	ParentID [8]byte
	Flags    byte
}

// traceparentLen is the length of a version-00 traceparent.
const traceparentLen = 55

// ParseTraceparent parses s as a version-00 traceparent,
// "00-<32 hex>-<16 hex>-<2 hex>", in lowercase hex as the specification
// requires. It refuses every other form: another version (ff is invalid,
// later ones are not known to this parser), uppercase hex, an all-zero
// trace-id or parent-id (the specification's invalid values), anything
// before or after. The error says which part is wrong.
func ParseTraceparent(s string) (TraceContext, error) {
	var tc TraceContext
	if len(s) != traceparentLen {
		return tc, fmt.Errorf("traceparent must be 55 characters 00-<32 hex>-<16 hex>-<2 hex>, found %d", len(s))
	}
	if s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return tc, errors.New("traceparent must be 00-<32 hex>-<16 hex>-<2 hex>, dashes misplaced")
	}
	var version [1]byte
	if err := lowerHex(version[:], s[0:2]); err != nil {
		return tc, fmt.Errorf("traceparent version: %w", err)
	}
	if version[0] != 0 {
		return tc, fmt.Errorf("traceparent version %s is not 00", s[0:2])
	}
	if err := lowerHex(tc.TraceID[:], s[3:35]); err != nil {
		return tc, fmt.Errorf("traceparent trace-id: %w", err)
	}
	if err := lowerHex(tc.ParentID[:], s[36:52]); err != nil {
		return tc, fmt.Errorf("traceparent parent-id: %w", err)
	}
	var flags [1]byte
	if err := lowerHex(flags[:], s[53:55]); err != nil {
		return tc, fmt.Errorf("traceparent trace-flags: %w", err)
	}
	tc.Flags = flags[0]
	if tc.TraceID == ([16]byte{}) {
		return tc, errors.New("traceparent trace-id is all zeros (invalid)")
	}
	if tc.ParentID == ([8]byte{}) {
		return tc, errors.New("traceparent parent-id is all zeros (invalid)")
	}
	return tc, nil
}

// lowerHex decodes src, which must be lowercase hex of exactly 2*len(dst)
// digits, into dst.
func lowerHex(dst []byte, src string) error {
	for i := 0; i < len(src); i++ {
		c := src[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%q is not lowercase hex", src)
		}
	}
	if _, err := hex.Decode(dst, []byte(src)); err != nil {
		return err
	}
	return nil
}

// String formats tc as a version-00 traceparent.
func (tc TraceContext) String() string {
	return fmt.Sprintf("00-%x-%x-%02x", tc.TraceID, tc.ParentID, tc.Flags)
}

// Child returns the trace context of a new span caused by tc's: the same
// trace-id and flags, a new parent-id derived from tc and seed (SHA-256),
// so that one seed (an event's id) always gives the same span and two
// seeds give different ones. The new parent-id is never all zeros nor
// tc's own.
func (tc TraceContext) Child(seed string) TraceContext {
	h := sha256.New()
	h.Write(tc.TraceID[:])
	h.Write(tc.ParentID[:])
	h.Write([]byte(seed))
	sum := h.Sum(nil)
	child := tc
	for off := 0; off+8 <= len(sum); off++ {
		copy(child.ParentID[:], sum[off:off+8])
		if child.ParentID != ([8]byte{}) && child.ParentID != tc.ParentID {
			return child
		}
	}
	child.ParentID = tc.ParentID
	child.ParentID[7] ^= 1 // unreachable in practice: 25 windows of SHA-256 all failed
	if child.ParentID == ([8]byte{}) {
		child.ParentID[7] = 2
	}
	return child
}
