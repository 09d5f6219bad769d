package queueopen_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/task"
)

// TestAskTasks: a bad request is refused before the queue is opened; a
// dry run needs no identity; under an approval policy a uid without a
// name is refused, and a named one gets the service and its identity.
func TestAskTasks(t *testing.T) {
	ctx := context.Background()
	all := task.Request{Kind: task.Replay, Selection: task.Selection{All: true}}
	nameless, ann := task.Operator{UID: 4242}, task.Operator{Name: "ann", UID: 4242}
	missing := filepath.Join(t.TempDir(), "none")
	if _, _, _, err := queueopen.AskTasks(ctx, missing, queueopen.Options{}, ann, task.Request{Kind: task.Discard, Selection: task.Selection{All: true}}, false); !errors.As(err, new(*task.RequestError)) {
		t.Errorf("a discard without a note: %v, want a *task.RequestError before the queue is opened", err)
	}
	dir := newQueue(t)
	if err := os.WriteFile(filepath.Join(dir, queueopen.ConfigName), []byte(`{"approval": {"replay_over": 0}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := queueopen.Init(ctx, dir, queueopen.Options{Use: queueopen.Write}); err != nil {
		t.Fatal(err)
	}
	// A writer adopts spool.conf's policy first; a dry run only reads.
	s, _, closeAll, err := queueopen.AskTasks(ctx, dir, queueopen.Options{}, nameless, all, true)
	if err != nil {
		t.Fatalf("dry run as a nameless uid: %v, want no identity needed", err)
	}
	if err := closeAll(); err != nil {
		t.Fatal(err)
	}
	if !s.Policy.Set {
		t.Errorf("dry run: policy %+v, want spool.conf's", s.Policy)
	}
	if _, _, _, err := queueopen.AskTasks(ctx, dir, queueopen.Options{}, nameless, all, false); !errors.As(err, new(*task.IdentityError)) {
		t.Errorf("a nameless uid under a policy: %v, want a *task.IdentityError", err)
	}
	_, who, closeAll, err := queueopen.AskTasks(ctx, dir, queueopen.Options{}, ann, all, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := closeAll(); err != nil {
		t.Fatal(err)
	}
	if who != ann.Identity() {
		t.Errorf("who %+v, want %+v", who, ann.Identity())
	}
}

// TestOpenHolds: the hold service of a queue pauses it in its ledger; a
// spool.conf that cannot be read is refused before the ledger is opened.
func TestOpenHolds(t *testing.T) {
	ctx := context.Background()
	dir := newQueue(t)
	if _, err := queueopen.Init(ctx, dir, queueopen.Options{Use: queueopen.Write}); err != nil {
		t.Fatal(err)
	}
	s, closeAll, err := queueopen.OpenHolds(ctx, dir, queueopen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Pause(ctx, task.Operator{Name: "ann"}.Identity(), "test")
	if cerr := closeAll(); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil || !c.Changed {
		t.Errorf("Pause: %+v, %v; want changed", c, err)
	}
	if err := os.WriteFile(filepath.Join(dir, queueopen.ConfigName), []byte(`{"order_feild": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := queueopen.OpenHolds(ctx, dir, queueopen.Options{}); !errors.As(err, new(*queueopen.ConfigError)) {
		t.Errorf("a bad spool.conf: %v, want a *ConfigError", err)
	}
}
