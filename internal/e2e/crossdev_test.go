//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCrossDeviceRefused puts error/ on another filesystem than the rest of
// the queue: a move there would not be an atomic rename, so spool must
// refuse at start, with exit status 2 (configuration) and one line on
// stderr, before it moves anything.
func TestCrossDeviceRefused(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	other, err := os.MkdirTemp("/dev/shm", "spool-e2e-")
	if err != nil {
		t.Skipf("no second filesystem to put error/ on: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(other) })
	var a, b syscall.Stat_t
	if err := syscall.Stat(q, &a); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(other, &b); err != nil {
		t.Fatal(err)
	}
	if a.Dev == b.Dev {
		t.Skip("/dev/shm is on the temporary directory's filesystem")
	}
	errDir := filepath.Join(q, errorStage)
	if err := os.Remove(errDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, errDir); err != nil {
		t.Fatal(err)
	}
	produce(t, q, 0, 3)
	if err := os.WriteFile(filepath.Join(other, "old.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{{"consume", q}, {"consume", q, "--watch"}, {"replay", q, "old.json"}} {
		snap := snapshot(t, q)
		r := run(t, args...)
		if r.code != 2 || len(lines(r.stderr)) != 1 ||
			!(strings.Contains(r.stderr, "filesystem") || strings.Contains(r.stderr, "device")) {
			t.Errorf("stages on two filesystems: want exit 2 and one line on stderr naming the problem, got\n%s", r)
		}
		if d := diffSnapshots(snap, snapshot(t, q)); len(d) > 0 {
			t.Errorf("%q refused, yet changed the queue: %q", args, d)
		}
		if _, err := os.Stat(filepath.Join(other, "old.json")); err != nil {
			t.Errorf("%q refused, yet moved error/old.json: %v", args, err)
		}
	}
}
