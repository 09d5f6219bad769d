package handler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestTailText(t *testing.T) {
	tb := &tailBuffer{max: 8}
	fmt.Fprint(tb, "first line\n")
	fmt.Fprint(tb, "last\n")
	if got := tb.text(100); got != "...ne\nlast" {
		t.Errorf("tail = %q", got)
	}
	big := &tailBuffer{max: 4}
	fmt.Fprint(big, "0123456789")
	if got := big.text(100); got != "...6789" {
		t.Errorf("tail of one big write = %q", got)
	}
	small := &tailBuffer{max: 100}
	fmt.Fprint(small, "  ok \n")
	if got := small.text(100); got != "ok" {
		t.Errorf("tail = %q", got)
	}
	// Cut inside a rune: no half rune, no invalid UTF-8.
	if got := tailText([]byte("aé"), 1, false); got != "" {
		t.Errorf("tailText cut inside é = %q", got)
	}
	if got := tailText([]byte("xéz"), 3, false); got != "...éz" {
		t.Errorf("tailText = %q", got)
	}
}

func TestRunShell(t *testing.T) {
	ctx := context.Background()
	r := runShell(ctx, `cat; echo "one" >&2; printf 'two\n\n' >&2; exit 3`, os.Environ(), []byte("in"), 5*time.Second, nil)
	if r.exitCode != 3 || r.timedOut || r.stderr != "one\ntwo" {
		t.Errorf("exit 3: %+v", r)
	}
	r = runShell(ctx, "exit 0", os.Environ(), nil, 5*time.Second, nil)
	if r.err != nil || r.exitCode != 0 {
		t.Errorf("exit 0: %+v", r)
	}
	// A command that ignores stdin must not fail on the write to it.
	r = runShell(ctx, "exit 0", os.Environ(), make([]byte, 1<<20), 5*time.Second, nil)
	if r.err != nil {
		t.Errorf("unread stdin: %+v", r)
	}
	r = runShell(ctx, `head -c 100000 /dev/zero | tr '\0' x >&2; echo END >&2; exit 1`, os.Environ(), nil, 5*time.Second, nil)
	if !strings.HasPrefix(r.stderr, "...x") || !strings.HasSuffix(r.stderr, "xxxEND") || len(r.stderr) > maxDetailText+3 {
		t.Errorf("long stderr kept as %d bytes: %.20q...%q", len(r.stderr), r.stderr, r.stderr[max(0, len(r.stderr)-10):])
	}
}

// TestRunShellTimeoutKillsGroup: on timeout the command and the children
// it started are killed, and runShell returns within its bound.
func TestRunShellTimeoutKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	start := time.Now()
	r := runShell(context.Background(), "sleep 30 & echo $! > "+pidFile+"; wait", os.Environ(), nil, 300*time.Millisecond, nil)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("runShell took %v with a 300ms timeout", took)
	}
	if !r.timedOut || r.err == nil {
		t.Fatalf("want a timeout, got %+v", r)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("child %d of the timed-out command is still alive", pid)
		}
		time.Sleep(10 * time.Millisecond) // poll interval: its parent (init) reaps it
	}
}
