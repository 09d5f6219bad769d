package queueopen_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/spoolq/spool/queueopen"
)

// TestWriteConfig: a new spool.conf is written readable by all; the same
// contract however written is not rewritten; another is refused without
// force, and replaced with it.
func TestWriteConfig(t *testing.T) {
	dir := newQueue(t)
	path := filepath.Join(dir, queueopen.ConfigName)
	a := []byte("{\n  \"key_field\": \"id\"\n}\n")
	if wrote, err := queueopen.WriteConfig(dir, a, false); err != nil || !wrote {
		t.Fatalf("new: wrote %v, %v", wrote, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode: %v, %v", fi, err)
	}
	if exists, same, err := queueopen.SameConfig(dir, []byte(`{"key_field":"id"}`)); err != nil || !exists || !same {
		t.Errorf("same contract: %v %v %v", exists, same, err)
	}
	if wrote, err := queueopen.WriteConfig(dir, []byte(`{"key_field": "id"}`), false); err != nil || wrote {
		t.Errorf("the same: wrote %v, %v", wrote, err)
	}
	b := []byte("{\n  \"key_field\": \"other\"\n}\n")
	var oc *queueopen.OtherContractError
	if _, err := queueopen.WriteConfig(dir, b, false); !errors.As(err, &oc) || oc.Path != path {
		t.Errorf("another without force: %v", err)
	}
	if wrote, err := queueopen.WriteConfig(dir, b, true); err != nil || !wrote {
		t.Errorf("another with force: wrote %v, %v", wrote, err)
	}
	if got, _ := os.ReadFile(path); string(got) != string(b) {
		t.Errorf("file %q, want %q", got, b)
	}
}
