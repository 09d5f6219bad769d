package queueopen_test

import (
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
