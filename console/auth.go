package console

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// Role is what an identity may do over HTTP, each role allowing what the
// ones below it allow: a viewer reads, an operator also asks for replays
// and discards and cancels tasks, an approver also approves the requests
// of others.
type Role int

// The roles, in order.
const (
	Viewer Role = iota + 1
	Operator
	Approver
)

var roleNames = map[Role]string{Viewer: "viewer", Operator: "operator", Approver: "approver"}

// String is the role's name as the token file spells it.
func (r Role) String() string {
	if n, ok := roleNames[r]; ok {
		return n
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// ParseRole is the role named s (viewer, operator, approver).
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("role %q: want viewer, operator or approver", s)
}

// Identity is who a request is from: a token's name and role.
type Identity struct {
	Name string
	Role Role
}

// Tokens are the identities of a token file, by the SHA-256 of their
// token.
type Tokens struct {
	list []token
}

type token struct {
	Identity
	hash [sha256.Size]byte
}

// LoadTokens reads the token file at path: one identity a line, "NAME
// ROLE SHA256-OF-TOKEN" separated by spaces or tabs, the hash as 64 hex
// digits (sha256sum of the token without its newline); empty lines and
// lines starting with # are skipped. A name is letters, digits and
// ._@- (at most 64 bytes). A malformed line, a name or a hash given
// twice, or a file without any identity is an error naming the line.
func LoadTokens(path string) (*Tokens, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	return ParseTokens(path, b)
}

// ParseTokens parses the text of a token file named name (see LoadTokens).
func ParseTokens(name string, b []byte) (*Tokens, error) {
	t := &Tokens{}
	names := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("token file %s:%d: want NAME ROLE SHA256-OF-TOKEN, found %d fields", name, n, len(f))
		}
		if !validName(f[0]) {
			return nil, fmt.Errorf("token file %s:%d: name %q: want letters, digits and ._@- (at most 64)", name, n, f[0])
		}
		if prev, ok := names[f[0]]; ok {
			return nil, fmt.Errorf("token file %s:%d: name %q is given on line %d already", name, n, f[0], prev)
		}
		role, err := ParseRole(f[1])
		if err != nil {
			return nil, fmt.Errorf("token file %s:%d: %w", name, n, err)
		}
		h, err := hex.DecodeString(f[2])
		if err != nil || len(h) != sha256.Size {
			return nil, fmt.Errorf("token file %s:%d: %q is not a SHA-256 in hex (64 digits: printf %%s TOKEN | sha256sum)", name, n, f[2])
		}
		tk := token{Identity: Identity{Name: f[0], Role: role}}
		copy(tk.hash[:], h)
		for _, o := range t.list {
			if o.hash == tk.hash {
				return nil, fmt.Errorf("token file %s:%d: %s has the token of %s: each identity needs its own", name, n, f[0], o.Name)
			}
		}
		names[f[0]] = n
		t.list = append(t.list, tk)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file %s: %w", name, err)
	}
	if len(t.list) == 0 {
		return nil, fmt.Errorf("token file %s: no identity (want lines NAME ROLE SHA256-OF-TOKEN)", name)
	}
	return t, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._@-", c) >= 0) {
			return false
		}
	}
	return true
}

// Lookup is the identity whose token is tok, compared by hash in constant
// time, and false when none has it.
func (t *Tokens) Lookup(tok string) (Identity, bool) {
	if tok == "" {
		return Identity{}, false
	}
	h := sha256.Sum256([]byte(tok))
	var found Identity
	ok := false
	for _, k := range t.list {
		if subtle.ConstantTimeCompare(h[:], k.hash[:]) == 1 {
			found, ok = k.Identity, true
		}
	}
	return found, ok
}

// Len is the number of identities.
func (t *Tokens) Len() int { return len(t.list) }

// constantEqual compares a and b in time that depends on their lengths
// only.
func constantEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
