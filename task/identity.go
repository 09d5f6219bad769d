package task

import (
	"strconv"
	"strings"

	"github.com/spoolq/spool/ledger"
)

// Who acts is named with its realm, the authority that vouches for the
// name, so that one name in two realms is never taken for two people
// unawares, and never for one without saying so:
//
//	os:alice     the OS user alice, the passwd name of the real uid that
//	             ran spool (or SUDO_USER under sudo) on the command line
//	token:olga   the token named olga of serve's token file, over HTTP
//	uid:4242     a uid without a passwd name, on the command line without
//	             a policy (refused under one: no one vouches for it)
//
// Four eyes compares persons, not names: a token and an OS user are one
// person when the token's name is the OS user's name (compared without
// case), or when the token's line names that OS user (os=alice); two
// tokens are one person when their names, or their os=, agree so. Every
// comparison errs towards "the same person": the cost of that error is an
// approval asked of someone else, of the other a request approved by its
// own requester.

// Realms of an Identity's Name.
const (
	// RealmOS is the OS user on the command line.
	RealmOS = "os"
	// RealmToken is a token's name over HTTP.
	RealmToken = "token"
	// RealmUID is a uid without a passwd name on the command line.
	RealmUID = "uid"
)

// OSUser is the identity of the OS user name (a passwd name) on the
// command line: Name "os:NAME", OS name, the role RoleApprover (as CLI).
func OSUser(name string) Identity {
	return Identity{Name: RealmOS + ":" + name, OS: name, Role: RoleApprover, Via: ledger.AuditCLI}
}

// UID is the identity of a uid without a passwd name on the command line:
// Name "uid:N". It is no person anyone vouches for: callers refuse it
// under an approval policy, and the identity only names it in the audit
// otherwise.
func UID(uid int) Identity {
	return Identity{Name: RealmUID + ":" + strconv.Itoa(uid), Role: RoleApprover, Via: ledger.AuditCLI}
}

// Realm returns the realm of id's Name and the name within it. A Name
// without one of the realms above (a --by name, or a row written before
// names had realms) is in the realm its Via implies: the OS's on the
// command line, the tokens' over HTTP.
func (id Identity) Realm() (realm, name string) {
	if r, n, ok := strings.Cut(id.Name, ":"); ok {
		switch r {
		case RealmOS, RealmToken, RealmUID:
			return r, n
		}
	}
	if id.Via == ledger.AuditHTTP {
		return RealmToken, id.Name
	}
	return RealmOS, id.Name
}

// persons are the keys by which id is a person: its name within its
// realm, and the OS user it is, when known, each folded to lower case.
// A uid keeps its realm: "uid:4242" is no one's name.
func (id Identity) persons() []string {
	realm, name := id.Realm()
	if realm == RealmUID {
		name = RealmUID + ":" + name
	}
	keys := []string{strings.ToLower(name)}
	if id.OS != "" {
		keys = append(keys, strings.ToLower(id.OS))
	}
	return keys
}

// SamePerson reports whether a and b are the same person across realms
// and case: whether a name or OS user of one is a name or OS user of the
// other, compared without case (see the top of this file). Four eyes
// refuses an approval by the same person as the request.
func SamePerson(a, b Identity) bool {
	for _, x := range a.persons() {
		for _, y := range b.persons() {
			if x == y || strings.EqualFold(x, y) {
				return true
			}
		}
	}
	return false
}

// requester is the identity that asked for t, as its record has it.
func (t Task) requester() Identity {
	return Identity{Name: t.By, OS: t.ByOS, Via: t.Via}
}

// ownRequest reports whether who asked for t, in any realm: the approval
// rule of four eyes.
func ownRequest(who Identity, t Task) bool { return SamePerson(who, t.requester()) }
