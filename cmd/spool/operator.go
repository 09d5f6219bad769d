package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"sync"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/task"
)

// operator is who runs spool on the command line, as the OS says
// (docs/OPERATIONS.md, "Identities"): the passwd name of the real uid,
// never $USER or $LOGNAME, which whoever runs spool sets as they please;
// under sudo the user who ran sudo.
type operator struct {
	// name is the passwd name; "" when the uid has none (a container's
	// uid without an /etc/passwd line).
	name string
	uid  int
}

// currentOperator is who runs this process, looked up once.
var currentOperator = sync.OnceValue(func() operator {
	uid := os.Getuid()
	if uid == 0 {
		if o, ok := sudoOperator(); ok {
			return o
		}
	}
	o := operator{uid: uid}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		o.name = u.Username
	}
	return o
})

// sudoOperator is the user who ran sudo, for a process whose real uid is
// 0: SUDO_USER, when SUDO_UID is set too and its passwd name is
// SUDO_USER. The variables are trusted only there: a user who is root
// already may act as anyone, and sudo sets both from the user it
// authenticated, so that the person is recorded rather than root. Under
// any other uid they are ignored.
func sudoOperator() (operator, bool) {
	name, id := os.Getenv("SUDO_USER"), os.Getenv("SUDO_UID")
	uid, err := strconv.Atoi(id)
	if name == "" || err != nil || uid < 0 {
		return operator{}, false
	}
	u, err := user.LookupId(id)
	if err != nil || u.Username != name {
		return operator{}, false
	}
	return operator{name: name, uid: uid}, true
}

// identity is the operator as a task identity: os:NAME, or uid:N for a
// uid without a passwd name.
func (o operator) identity() task.Identity {
	if o.name == "" {
		return task.UID(o.uid)
	}
	return task.OSUser(o.name)
}

// actor is the operator as the audit names it: os:NAME, or uid:N.
func (o operator) actor() string { return o.identity().Name }

// named reports whether by names the operator: their passwd name, or
// the audit's os:NAME.
func (o operator) named(by string) bool {
	return o.name != "" && (by == o.name || by == o.actor())
}

// osUser names the user running spool for the audit and the ledger's
// records: os:NAME, or uid:N for a uid without a passwd name.
func osUser() string { return currentOperator().actor() }

// cliIdentity is who acts on the command line for action, with --by by
// ("" when not given), or a refusal (exit 2, audited through s, nothing
// else done). strict is for an action under an approval policy, and for
// an approval or a change of the policy itself: the operator must then be
// a named OS user and --by may name only them: a uid without a passwd name is no
// one anyone vouches for, and four eyes needs to know who asks and who
// approves. Without a policy --by is recorded as given, and the operator
// without a name as uid:N.
func cliIdentity(ctx context.Context, s *task.Service, action string, by string, strict bool) (task.Identity, error) {
	o := currentOperator()
	who := o.identity()
	var refusal string
	switch {
	case strict && o.name == "":
		refusal = fmt.Sprintf("uid %d has no user name (no passwd entry): under the approval policy the operator must be a named OS user, and $USER proves nothing. Try: run spool as a user with a passwd entry (useradd, or the host's /etc/passwd in the container)", o.uid)
	case by != "" && !o.named(by) && strict:
		refusal = fmt.Sprintf("--by %s: under the approval policy of %s the operator is the OS user (%s), not another name", by, configName, o.name)
	case by != "" && !o.named(by):
		return task.CLI(by), nil
	}
	if refusal == "" {
		return who, nil
	}
	err := &usageError{msg: refusal}
	sel := map[string]any{}
	if by != "" {
		sel["by"] = by
	}
	if v := os.Getenv("USER"); v != "" && o.name == "" {
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
