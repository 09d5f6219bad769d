package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"golang.org/x/sys/unix"
)

// Operator is who runs a program on the command line, as the OS says
// (docs/OPERATIONS.md, "Identities"): the passwd name of the real uid,
// never $USER or $LOGNAME, which whoever runs it sets as they please;
// under sudo the user who ran sudo.
type Operator struct {
	// Name is the passwd name; "" when the uid has none (a container's
	// uid without an /etc/passwd line).
	Name string
	UID  int
}

// CurrentOperator is who runs this process, looked up once.
var CurrentOperator = sync.OnceValue(func() Operator {
	uid := os.Getuid()
	if uid == 0 {
		if o, ok := sudoOperator(); ok {
			return o
		}
	}
	o := Operator{UID: uid}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		o.Name = u.Username
	}
	return o
})

// sudoOperator is the user who ran sudo, for a process whose real uid is
// 0: SUDO_USER, when SUDO_UID is set too and its passwd name is
// SUDO_USER. The variables are trusted only there: a user who is root
// already may act as anyone, and sudo sets both from the user it
// authenticated, so that the person is recorded rather than root. Under
// any other uid they are ignored.
func sudoOperator() (Operator, bool) {
	name, id := os.Getenv("SUDO_USER"), os.Getenv("SUDO_UID")
	uid, err := strconv.Atoi(id)
	if name == "" || err != nil || uid < 0 {
		return Operator{}, false
	}
	u, err := user.LookupId(id)
	if err != nil || u.Username != name {
		return Operator{}, false
	}
	return Operator{Name: name, UID: uid}, true
}

// Identity is the operator as a task identity: os:NAME, or uid:N for a
// uid without a passwd name.
func (o Operator) Identity() Identity {
	if o.Name == "" {
		return UID(o.UID)
	}
	return OSUser(o.Name)
}

// Actor is the operator as the audit names it: os:NAME, or uid:N.
func (o Operator) Actor() string { return o.Identity().Name }

// named reports whether by names the operator: their passwd name, or
// the audit's os:NAME.
func (o Operator) named(by string) bool {
	return o.Name != "" && (by == o.Name || by == o.Actor())
}

// IdentityError refuses an operator for an action: a uid without a
// passwd name, or a --by naming someone else, under an approval policy;
// an operator who may not write the error/ a discard empties. It wraps
// ErrBadRequest: the command line (or who runs it) must change.
type IdentityError struct{ Reason string }

// Error is the reason, one line.
func (e *IdentityError) Error() string { return e.Reason }

// Unwrap makes an *IdentityError match ErrBadRequest.
func (e *IdentityError) Unwrap() error { return ErrBadRequest }

// OperatorIdentity is who acts on the command line for action: the
// operator o, or by (a --by, "" when not given). strict is for an action
// under an approval policy, and for an approval or a change of the policy
// itself: o must then be a named OS user and by may name only them (a uid
// without a passwd name is no one anyone vouches for, and four eyes needs
// to know who asks and who approves); otherwise it is an *IdentityError,
// audited as refused (with by and, for a nameless uid, the $USER it
// claimed), nothing else done. Without strict, by is the identity as
// given (CLI), and a nameless operator is uid:N.
func (s *Service) OperatorIdentity(ctx context.Context, o Operator, action, by string, strict bool) (Identity, error) {
	who := o.Identity()
	var refusal string
	switch {
	case strict && o.Name == "":
		refusal = fmt.Sprintf("uid %d has no user name (no passwd entry): under the approval policy the operator must be a named OS user, and $USER proves nothing. Try: run spool as a user with a passwd entry (useradd, or the host's /etc/passwd in the container)", o.UID)
	case by != "" && !o.named(by) && strict:
		// The queue's configuration file, where the policy was first set.
		refusal = fmt.Sprintf("--by %s: under the approval policy of %s the operator is the OS user (%s), not another name", by, "spool.conf", o.Name)
	case by != "" && !o.named(by):
		return CLI(by), nil
	}
	if refusal == "" {
		return who, nil
	}
	err := &IdentityError{Reason: refusal}
	sel := map[string]any{}
	if by != "" {
		sel["by"] = by
	}
	if v := os.Getenv("USER"); v != "" && o.Name == "" {
		// What the environment claimed, kept beside the refusal.
		sel["env_user"] = v
	}
	text, jerr := json.Marshal(sel)
	if jerr != nil {
		return who, errors.Join(err, jerr)
	}
	if _, aerr := s.Ledger.Audit().Record(ctx, ledger.AuditEntry{Actor: who.Name, Via: ledger.AuditCLI, Action: action,
		Selection: string(text), Host: s.Host, PID: s.PID}, ledger.AuditRefused, nil, refusal); aerr != nil {
		return who, errors.Join(err, aerr)
	}
	return who, err
}

// CheckDiscardAccess refuses, before anything is opened or recorded, a
// discard of the queue at dir by o when o may not write its error/:
// discarding removes files from error/ and records them in the ledger,
// which needs write access to both. A missing error/ is left for the
// discard to report. The refusal is an *IdentityError (ErrBadRequest).
func CheckDiscardAccess(dir string, o Operator) error {
	errDir := filepath.Join(dir, string(queue.Error))
	if err := unix.Access(errDir, unix.W_OK|unix.X_OK); err != nil && !errors.Is(err, unix.ENOENT) {
		return &IdentityError{Reason: fmt.Sprintf("%s: %s may not write it (%v): discarding removes files from error/ and records them in the ledger, which needs write access to both; run it as the queue's owner",
			errDir, o.Actor(), err)}
	}
	return nil
}
