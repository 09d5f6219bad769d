//go:build linux

package queue

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCallsLock: a session's calls lock is one file, made at the first
// call and kept; it is held while the session lives, and after the
// session is gone while any process that inherited it runs, and only
// then is it free. A session closed with claims left keeps it for the
// recovery; one closed clean removes it.
func TestCallsLock(t *testing.T) {
	if bootID() == "" {
		t.Skip("no boot id on this system")
	}
	d := newQueue(t)
	s, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	if st, err := d.ProbeCalls(s.ID()); err != nil || st != CallsUnknown {
		t.Fatalf("before the first call: ProbeCalls = %v, %v; want unknown (no lock yet)", st, err)
	}
	lock, err := s.CallsLock()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.CallsLock(); err != nil || again != lock {
		t.Fatalf("a second CallsLock = %v, %v; want the same file", again, err)
	}
	path := filepath.Join(d.Path(), CallsLockDir, s.ID())
	if b, err := os.ReadFile(path); err != nil || strings.TrimSpace(string(b)) != bootID() {
		t.Fatalf("the lock file holds %q, %v; want this boot", b, err)
	}
	if st, err := d.ProbeCalls(s.ID()); err != nil || st != CallsRunning {
		t.Fatalf("a live session's lock: ProbeCalls = %v, %v; want running", st, err)
	}

	// A call's process inherits it, and outlives the session, which dies
	// with a claim in flight (Close leaves its directory).
	child := exec.Command("sleep", "60")
	child.ExtraFiles = []*os.File{lock}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	put(t, d, Inbox, "a.json", `{}`)
	if _, err := s.Claim("a.json"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err == nil {
		t.Fatal("Close of a session with a claim in flight succeeded")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the lock of a session closed with claims left is gone: %v", err)
	}
	if st, err := d.ProbeCalls(s.ID()); err != nil || st != CallsRunning {
		t.Fatalf("held by a process of its calls only: ProbeCalls = %v, %v; want running", st, err)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if st, err := d.ProbeCalls(s.ID()); err != nil || st != CallsGone {
		t.Fatalf("the last holder killed: ProbeCalls = %v, %v; want gone", st, err)
	}

	// Recovered, its session directory is gone: the lock is listed as
	// a dead session's until it is removed.
	if err := os.RemoveAll(filepath.Join(d.StagePath(Processing), s.ID())); err != nil {
		t.Fatal(err)
	}
	if got, err := d.DeadCallsLocks(); err != nil || !slices.Equal(got, []string{s.ID()}) {
		t.Fatalf("DeadCallsLocks = %v, %v; want the dead session's", got, err)
	}
	for range 2 { // twice: removing a lock removed already is no error
		if err := d.RemoveCallsLock(s.ID()); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := d.ProbeCalls(s.ID()); err != nil || st != CallsUnknown {
		t.Fatalf("after RemoveCallsLock: ProbeCalls = %v, %v; want unknown", st, err)
	}

	// A session that ends clean removes its lock; a live one is not
	// listed as dead.
	live, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := live.CallsLock(); err != nil {
		t.Fatal(err)
	}
	if got, err := d.DeadCallsLocks(); err != nil || len(got) != 0 {
		t.Fatalf("DeadCallsLocks = %v, %v; want none while the session lives", got, err)
	}
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.Path(), CallsLockDir, live.ID())); !os.IsNotExist(err) {
		t.Fatalf("a session closed clean left its lock: %v", err)
	}
}

// TestCallsLockOtherBoot: a lock that does not name this boot (another
// machine's on a shared filesystem, an earlier boot's, or one whose
// session died before writing it) proves nothing, free or not.
func TestCallsLockOtherBoot(t *testing.T) {
	if bootID() == "" {
		t.Skip("no boot id on this system")
	}
	d := newQueue(t)
	dir := filepath.Join(d.Path(), CallsLockDir)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"aaaa-1@vm":    "00000000-0000-0000-0000-000000000000\n",
		"bbbb-2@vm":    "",
		"cccc-3@other": bootID() + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]CallsState{"aaaa-1@vm": CallsUnknown, "bbbb-2@vm": CallsUnknown, "cccc-3@other": CallsGone} {
		if st, err := d.ProbeCalls(name); err != nil || st != want {
			t.Errorf("ProbeCalls(%s) = %v, %v; want %v", name, st, err, want)
		}
	}
	for _, bad := range []string{"", ".calls", "a/b"} {
		if _, err := d.ProbeCalls(bad); err == nil {
			t.Errorf("ProbeCalls(%q) took it for a session", bad)
		}
	}
}
