package task_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/task"
)

// TestOperatorIdentity: without a policy --by is recorded as given and a
// nameless uid is uid:N; under one, a nameless uid and a --by naming
// someone else are refused (ErrBadRequest) and audited as refused.
func TestOperatorIdentity(t *testing.T) {
	ctx := context.Background()
	d, l := deadQueue(t, 0)
	s := &task.Service{Dir: d, Ledger: l, Host: "h", PID: 1}
	alice, nameless := task.Operator{Name: "alice", UID: 1000}, task.Operator{UID: 4242}
	for _, c := range []struct {
		o      task.Operator
		by     string
		strict bool
		want   string // the identity's name, or the refusal's start
	}{
		{alice, "", false, "os:alice"},
		{alice, "bob", false, "bob"},
		{alice, "os:alice", true, "os:alice"},
		{nameless, "", false, "uid:4242"},
		{nameless, "", true, "uid 4242 has no user name"},
		{alice, "bob", true, "--by bob: under the approval policy"},
	} {
		who, err := s.OperatorIdentity(ctx, c.o, "replay", c.by, c.strict)
		var ie *task.IdentityError
		switch {
		case errors.As(err, &ie):
			if !errors.Is(err, task.ErrBadRequest) || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("%+v by %q strict %v: %v, want %q", c.o, c.by, c.strict, err, c.want)
			}
		case err != nil || who.Name != c.want:
			t.Errorf("%+v by %q strict %v: %+v, %v; want %q", c.o, c.by, c.strict, who, err, c.want)
		}
	}
	rows, err := l.Audit().List(ctx, ledger.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, r := range rows {
		if r.Outcome == ledger.AuditRefused {
			refused++
		}
	}
	if refused != 2 {
		t.Errorf("%d refusals audited, want 2", refused)
	}
}

// TestCheckDiscardAccess: an error/ its operator may write, or none, lets
// a discard go on; one it may not (tested where this process is not
// root, whom permissions do not stop) is refused, naming the operator.
func TestCheckDiscardAccess(t *testing.T) {
	dir := t.TempDir()
	o := task.Operator{Name: "alice", UID: 1000}
	if err := task.CheckDiscardAccess(dir, o); err != nil {
		t.Errorf("no error/: %v", err)
	}
	errDir := filepath.Join(dir, "error")
	if err := os.Mkdir(errDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := task.CheckDiscardAccess(dir, o); err != nil {
		t.Errorf("a writable error/: %v", err)
	}
	if os.Geteuid() == 0 {
		return
	}
	if err := os.Chmod(errDir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(errDir, 0o755) })
	err := task.CheckDiscardAccess(dir, o)
	if !errors.Is(err, task.ErrBadRequest) || !strings.Contains(err.Error(), "os:alice may not write it") {
		t.Errorf("a read-only error/: %v", err)
	}
}
