package task

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Policy is the queue's approval policy, the "approval" object of
// spool.conf: {"replay_over": N, "discard_over": N}. A replay (a discard)
// that selects more than N files waits for a second operator's approval.
type Policy struct {
	// Set reports that the queue has a policy (the object is in
	// spool.conf, even empty): then every replay and discard is a task, and
	// on the command line --by may not name anyone but the OS user.
	Set bool
	// ReplayOver and DiscardOver are the most files a replay, a discard,
	// may select without an approval; -1 when the key is left out (no
	// approval needed for that kind). 0 means every one needs an approval.
	ReplayOver, DiscardOver int
}

// NoPolicy is the policy of a queue whose spool.conf has no "approval".
var NoPolicy = Policy{ReplayOver: -1, DiscardOver: -1}

// Needs reports whether a task of kind selecting files files needs an
// approval under p.
func (p Policy) Needs(kind Kind, files int) bool {
	if !p.Set {
		return false
	}
	over := p.ReplayOver
	if kind == Discard {
		over = p.DiscardOver
	}
	return over >= 0 && files > over
}

// policyKeys are the keys of the approval object.
var policyKeys = []string{"replay_over", "discard_over"}

// ParsePolicy decodes the value of spool.conf's "approval" key strictly,
// as the rest of the file is read: a JSON object whose keys are exactly
// replay_over and discard_over (case matters), each at most once, each a
// whole number >= 0; an unknown key, null, a string, a fraction or a
// negative number is an error. A key left out needs no approval for its
// kind.
func ParsePolicy(raw []byte) (Policy, error) {
	p := NoPolicy
	p.Set = true
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return p, fmt.Errorf("approval: %w", err)
	}
	if tok != json.Delim('{') {
		return p, errors.New(`approval: want an object such as {"replay_over": 100, "discard_over": 0}`)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return p, fmt.Errorf("approval: %w", err)
		}
		key := tok.(string) // object keys are strings
		if key != policyKeys[0] && key != policyKeys[1] {
			return p, fmt.Errorf("approval: unknown key %q: the keys are replay_over, discard_over", key)
		}
		if seen[key] {
			return p, fmt.Errorf("approval: key %q appears twice: give it once", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return p, fmt.Errorf("approval: %w", err)
		}
		n, err := strconv.Atoi(string(raw))
		switch {
		case err != nil:
			return p, fmt.Errorf("approval: %s is %s: want a whole number of files >= 0", key, raw)
		case n < 0:
			return p, fmt.Errorf("approval: %s is %d: want a whole number of files >= 0", key, n)
		}
		if key == "replay_over" {
			p.ReplayOver = n
		} else {
			p.DiscardOver = n
		}
	}
	if _, err := dec.Token(); err != nil {
		return p, fmt.Errorf("approval: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return p, errors.New("approval: trailing data after the object")
	}
	return p, nil
}
