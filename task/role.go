package task

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spoolq/spool/ledger"
)

// Role is what an identity may do, ordered: each role may do what the
// ones below it may.
type Role int

const (
	// RoleNone is no role: it may do nothing (the zero Role).
	RoleNone Role = iota
	// RoleViewer reads: tasks, dead letters, the audit.
	RoleViewer
	// RoleOperator also asks for replays and discards and cancels tasks.
	RoleOperator
	// RoleApprover also approves the requests of others.
	RoleApprover
)

var roleNames = [...]string{"", "viewer", "operator", "approver"}

// String returns the role's name: "viewer", "operator", "approver", or ""
// for RoleNone.
func (r Role) String() string {
	if r < 0 || int(r) >= len(roleNames) {
		return fmt.Sprintf("role(%d)", int(r))
	}
	return roleNames[r]
}

// ParseRole returns the role named s (exactly "viewer", "operator" or
// "approver"), or an error naming them.
func ParseRole(s string) (Role, error) {
	for i, n := range roleNames {
		if i > 0 && n == s {
			return Role(i), nil
		}
	}
	return RoleNone, fmt.Errorf("role %q: want viewer, operator or approver", s)
}

// MarshalJSON writes the role as its name.
func (r Role) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

// Identity is who acts: a name, a role and how it asked.
type Identity struct {
	// Name is the OS user on the command line, a token's name over HTTP.
	Name string
	// Role is what it may do.
	Role Role
	// Via is ledger.AuditCLI or ledger.AuditHTTP. On the command line no
	// role is recorded in the audit (the OS user has none of its own).
	Via string
}

// CLI is the identity of the OS user name on the command line: the role
// RoleApprover, since whoever may write the queue and its ledger may move
// its files; a request still needs someone else's approval.
func CLI(name string) Identity {
	return Identity{Name: name, Role: RoleApprover, Via: ledger.AuditCLI}
}

// auditRole is the role as the audit records it: none on the command line.
func (id Identity) auditRole() string {
	if id.Via == ledger.AuditCLI {
		return ""
	}
	return id.Role.String()
}

// Token is one line of a token file: a name, its role and the hex
// SHA-256 of its secret token.
type Token struct {
	Name string
	Role Role
	Hash [sha256.Size]byte
}

// Tokens are the identities of a token file, looked up by token.
type Tokens []Token

// ParseTokens reads a token file: one identity a line, "NAME ROLE
// SHA256-OF-TOKEN" separated by blanks (the hash as 64 hex digits, of the
// token's bytes, as sha256sum prints it); a # at the start of a line or
// after a blank begins a comment to the end of the line, and blank lines
// are ignored. A line of another shape, an unknown role, a name
// or a hash given twice is an error naming its line, and no token is
// returned: a file half understood would let someone in, or keep them out,
// unnoticed.
func ParseTokens(r io.Reader) (Tokens, error) {
	var out Tokens
	names, hashes := map[string]int{}, map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.Index(line, "#"); i >= 0 && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: want NAME ROLE SHA256-OF-TOKEN, got %d fields", n, len(f))
		}
		role, err := ParseRole(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		raw, err := hex.DecodeString(strings.ToLower(f[2]))
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("line %d: %q is not a SHA-256 in hex (64 digits): put the token's hash, as sha256sum prints it, not the token", n, f[2])
		}
		t := Token{Name: f[0], Role: role}
		copy(t.Hash[:], raw)
		if prev, ok := names[t.Name]; ok {
			return nil, fmt.Errorf("line %d: name %q already on line %d", n, t.Name, prev)
		}
		if prev, ok := hashes[t.Hash]; ok {
			return nil, fmt.Errorf("line %d: the same token hash as line %d", n, prev)
		}
		names[t.Name], hashes[t.Hash] = n, n
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	return out, nil
}

// ErrUnknownToken is returned by Tokens.Identify for a token no line has.
var ErrUnknownToken = errors.New("unknown token")

// Identify returns the identity (Via ledger.AuditHTTP) whose hash is the
// SHA-256 of token, comparing every line in constant time; an empty token
// or one no line has fails with ErrUnknownToken.
func (ts Tokens) Identify(token string) (Identity, error) {
	if token == "" {
		return Identity{}, ErrUnknownToken
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i, t := range ts {
		if subtle.ConstantTimeCompare(sum[:], t.Hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Identity{}, ErrUnknownToken
	}
	return Identity{Name: ts[found].Name, Role: ts[found].Role, Via: ledger.AuditHTTP}, nil
}
