package task

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"

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
	// Name is who acts as the audit records it, with its realm
	// (identity.go): "os:alice" for the OS user alice on the command line
	// (OSUser), "token:olga" for a token's name over HTTP
	// (Tokens.Identify); a name without a realm is one given on the
	// command line by --by where no policy asks who, as given (CLI).
	Name string
	// OS is the OS user this identity is, when known: the OS user's own
	// name on the command line, the os= of a token's line. Four eyes
	// compares persons by it as well as by name (SamePerson).
	OS string
	// Role is what it may do.
	Role Role
	// Via is ledger.AuditCLI or ledger.AuditHTTP. On the command line no
	// role is recorded in the audit (the OS user has none of its own).
	Via string
	// Client is the network address an HTTP request came from (the
	// console's TCP peer), which every audit row of its actions records in
	// its selection as client; empty on the command line.
	Client string
}

// CLI is the identity of name on the command line, recorded as given
// (OSUser is the OS user's): the role RoleApprover, since whoever may
// write the queue and its ledger may move its files; a request still
// needs someone else's approval.
func CLI(name string) Identity {
	return Identity{Name: name, Role: RoleApprover, Via: ledger.AuditCLI}
}

// AuditSelection is selection as an audit row of id's action records it:
// with id's Client under "client" when it has one (a JSON object's keys
// and client, or selection under "selection" when it is no object), as
// it is otherwise. Every writer of audit rows for an identity (the
// Service, the console, package hold) records its selection through it.
func (id Identity) AuditSelection(selection any) any {
	if id.Client == "" {
		return selection
	}
	m := map[string]any{}
	switch v := selection.(type) {
	case nil:
	case map[string]any:
		maps.Copy(m, v)
	default:
		b, err := json.Marshal(selection)
		if err != nil {
			return selection // the writer's own marshal reports it
		}
		if err := json.Unmarshal(b, &m); err != nil {
			m = map[string]any{"selection": selection}
		} else if m == nil {
			m = map[string]any{} // a nil map or pointer marshals as null
		}
	}
	m["client"] = id.Client
	return m
}

// AuditEntry is the audit entry of id's action on selection, written by
// the process pid on host: id's name as the actor ("(anonymous)" without
// one), its way in (the command line when unset), its role except on the
// command line, where the OS user has none of its own, and its selection
// as AuditSelection records it ({} for none). Every writer of audit rows
// for an identity (the Service, the console, package hold) builds its
// entry here, so that a row says the same of an identity whichever face
// wrote it.
func (id Identity) AuditEntry(action string, selection any, host string, pid int) (ledger.AuditEntry, error) {
	e := ledger.AuditEntry{Actor: cmp.Or(id.Name, "(anonymous)"), Via: cmp.Or(id.Via, ledger.AuditCLI),
		Action: action, Host: host, PID: pid}
	if e.Via != ledger.AuditCLI {
		e.Role = id.Role.String()
	}
	e.Selection = "{}" // for a nil selection, as the ledger stores it
	return e.Select(id.AuditSelection(selection))
}

// auditRole is the role as the audit and a task record it: none on the
// command line.
func (id Identity) auditRole() string {
	if id.Via == ledger.AuditCLI {
		return ""
	}
	return id.Role.String()
}
