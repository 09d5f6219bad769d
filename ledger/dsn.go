package ledger

import (
	"errors"
	"slices"
)

// ErrBadDSN is wrapped by a backend's Open for a DSN it cannot parse (a
// bad port, an unknown sslmode): the address is wrong, which no retry or
// server can fix, so a command refuses it as a configuration error.
var ErrBadDSN = errors.New("bad ledger address")

// Schemes returns the schemes of the registered backends, sorted: what a
// DSN may begin with (see Register).
func Schemes() []string {
	backends.RLock()
	defer backends.RUnlock()
	out := make([]string, 0, len(backends.by))
	for s := range backends.by {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
