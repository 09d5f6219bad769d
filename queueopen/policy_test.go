package queueopen_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/task"
)

// TestApprovalPolicy: the approval section is read strictly with the rest
// of spool.conf; a file or section missing is no policy, a bad section an
// invalid *ConfigError naming the file.
func TestApprovalPolicy(t *testing.T) {
	for _, c := range []struct {
		conf string // "" for no file
		want task.Policy
		sub  string
	}{
		{"", task.NoPolicy, ""},
		{`{"approval": {"replay_over": 10, "discard_over": 0}}`, task.Policy{Set: true, ReplayOver: 10, DiscardOver: 0}, ""},
		{`{"key_field": "id"}`, task.NoPolicy, ""},
		{`{"approval": {"replay_over": -1}}`, task.Policy{}, "replay_over is -1"},
		{`{"approval": {"replay-over": 1}}`, task.Policy{}, `unknown key "replay-over"`},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, queueopen.ConfigName)
		if c.conf != "" {
			if err := os.WriteFile(path, []byte(c.conf), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		p, file, err := queueopen.ApprovalPolicy(dir)
		if file != path {
			t.Errorf("%s: file %q, want %q", c.conf, file, path)
		}
		if c.sub == "" {
			if err != nil || p != c.want {
				t.Errorf("%s: %+v, %v; want %+v", c.conf, p, err, c.want)
			}
			continue
		}
		var ce *queueopen.ConfigError
		if !errors.As(err, &ce) || !ce.Invalid || !strings.Contains(err.Error(), c.sub) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an invalid *ConfigError naming %s and saying %q", c.conf, err, path, c.sub)
		}
	}
}

// TestChangePolicy: a bad setting is refused before the queue is opened;
// a uid without a name is refused; a change from spool.conf's section
// becomes the ledger's, which ReadPolicy then reports, and a section
// that says otherwise Differs.
func TestChangePolicy(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "none")
	if _, _, err := queueopen.ChangePolicy(ctx, missing, queueopen.Options{}, task.Operator{Name: "ann"}, []string{"replay_ovr=1"}); !errors.Is(err, task.ErrBadRequest) {
		t.Errorf("a bad setting: %v, want task.ErrBadRequest before the queue is opened", err)
	}
	dir := newQueue(t)
	if err := os.WriteFile(filepath.Join(dir, queueopen.ConfigName), []byte(`{"approval": {"replay_over": 10}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := queueopen.Init(ctx, dir, queueopen.Options{Use: queueopen.Write}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := queueopen.ChangePolicy(ctx, dir, queueopen.Options{}, task.Operator{UID: 4242}, []string{"discard_over=3"}); !errors.As(err, new(*task.IdentityError)) {
		t.Errorf("a uid without a name: %v, want a *task.IdentityError", err)
	}
	from, now, err := queueopen.ChangePolicy(ctx, dir, queueopen.Options{}, task.Operator{Name: "ann", UID: 4242}, []string{"discard_over=3"})
	if err != nil {
		t.Fatal(err)
	}
	if from.Set || now.Ledger.Settings() != "replay_over=10 discard_over=3" || !now.Conf.Set || now.File != filepath.Join(dir, queueopen.ConfigName) {
		t.Errorf("from %+v now %+v: want none, then spool.conf's with discard_over=3", from, now)
	}
	st, err := queueopen.ReadPolicy(ctx, dir, queueopen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Ledger.Settings() != now.Ledger.Settings() || !st.Differs() {
		t.Errorf("ReadPolicy %+v: want the ledger's %s, differing from spool.conf's", st, now.Ledger.Settings())
	}
}
