package spool

import (
	"crypto/sha256"
	"encoding/hex"
)

// ContentHash is the hash spool keeps of a message's content, as it was
// read from the file: the SHA-256 of content in lower-case hex, 64
// characters. It is Delivery.Hash and the ledger's content_hash column, and
// how a redelivered msg_id is told to be the same message or a conflicting
// one; it must not change for a ledger already written.
func ContentHash(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}
