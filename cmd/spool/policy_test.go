package main

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/task"
)

// TestApprovalConfig: spool.conf's "approval" is read strictly with the
// rest of the file: a bad one is a configuration error (exit 2) for the
// contract too, naming the file; a good one is the policy, and a file
// without it is no policy.
func TestApprovalConfig(t *testing.T) {
	for _, c := range []struct {
		conf string
		want task.Policy
		sub  string
	}{
		{`{"approval": {"replay_over": 10, "discard_over": 0}}`, task.Policy{Set: true, ReplayOver: 10, DiscardOver: 0}, ""},
		{`{"key_field": "id", "approval": {}}`, task.Policy{Set: true, ReplayOver: -1, DiscardOver: -1}, ""},
		{`{"key_field": "id"}`, task.NoPolicy, ""},
		{`{"approval": {"replay_over": -1}}`, task.Policy{}, "replay_over is -1"},
		{`{"approval": {"replay-over": 1}}`, task.Policy{}, `unknown key "replay-over"`},
		{`{"approval": null}`, task.Policy{}, "approval is null"},
		{`{"approval": 5}`, task.Policy{}, "want an object"},
		{`{"approval": {}, "approval": {}}`, task.Policy{}, "twice"},
		{`{"Approval": {}}`, task.Policy{}, `did you mean "approval"`},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, configName)
		write(t, path, c.conf)
		p, _, err := queueopen.ApprovalPolicy(dir)
		_, _, cerr := addContractFlags(flag.NewFlagSet("t", flag.ContinueOnError)).contractFrom(dir)
		if c.sub == "" {
			if err != nil || cerr != nil || p != c.want {
				t.Errorf("%s: %+v, %v, %v; want %+v", c.conf, p, err, cerr, c.want)
			}
			continue
		}
		for _, e := range []error{err, cerr} {
			if e == nil || exitCode(e) != exitUsage || !strings.Contains(e.Error(), c.sub) || !strings.Contains(e.Error(), path) {
				t.Errorf("%s: %v, want exit 2 naming %s and saying %q", c.conf, e, path, c.sub)
			}
		}
	}
}
