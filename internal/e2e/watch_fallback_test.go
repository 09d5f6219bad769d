//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hogInotifyEnv makes the test binary a helper that takes every inotify
// instance its user may have (fs.inotify.max_user_instances), says so on
// stdout and holds them until its stdin closes.
const hogInotifyEnv = "SPOOL_E2E_HOG_INOTIFY"

// hogInotify is the helper's whole run; its result is the exit status.
func hogInotify() int {
	var fds []int
	for {
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
		if errors.Is(err, unix.EMFILE) {
			break
		}
		if err != nil {
			fmt.Printf("inotify_init1: %v\n", err)
			return 1
		}
		fds = append(fds, fd)
		if len(fds) > 1<<16 {
			fmt.Println("no limit on inotify instances")
			return 1
		}
	}
	fmt.Printf("holding %d\n", len(fds))
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until stdin closes
	return 0
}

// TestWatchNoNotifications: a watcher that gets no inotify instance (its
// user holds fs.inotify.max_user_instances of them already, as a host
// full of file watchers does) says so once, polls inbox/ instead, and
// still consumes what arrives. Run as nobody, whose instances the helper
// takes, so that no other test's watcher (all root) loses its own.
func TestWatchNoNotifications(t *testing.T) {
	t.Parallel()
	// The helper must run out of the user's instances, not of its own
	// descriptors: with a limit in the thousands it would need as many.
	limit, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances")
	if err != nil {
		t.Skipf("no inotify: %v", err)
	}
	if n, err := strconv.Atoi(strings.TrimSpace(string(limit))); err != nil || n > 4096 {
		t.Skipf("fs.inotify.max_user_instances is %q: too many for the helper to take", limit)
	}
	as := asNobody(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	hogBin := filepath.Join(filepath.Dir(as.bin), "hog")
	if err := copyFile(self, hogBin, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	hog := as.command(ctx, "-test.run=^$")
	hog.Path, hog.Args[0] = hogBin, hogBin
	hog.Env = append(os.Environ(), hogInotifyEnv+"=1")
	stdin, err := hog.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := hog.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := hog.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if !strings.HasPrefix(line, "holding ") {
		stdin.Close()
		_ = hog.Wait() // its output said what went wrong
		t.Skipf("cannot take nobody's inotify instances: %q, %v", line, err)
	}
	defer func() {
		stdin.Close()
		if err := hog.Wait(); err != nil {
			t.Errorf("inotify helper: %v", err)
		}
	}()

	q := filepath.Join(as.dir, "q")
	as.mustRun(t, 0, "init", q)
	as.chown(t, q)
	var out, errb bytes.Buffer
	watcher := as.command(ctx, "consume", q, "--watch")
	watcher.Stdout, watcher.Stderr = &out, &errb
	if err := watcher.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- watcher.Wait() }()
	produce(t, q, 0, 3)
	poll(30*time.Second, 10*time.Millisecond, func() bool { return countNames(t, q, done) >= 3 })
	if err := watcher.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	werr := <-exited
	r := result{args: watcher.Args[1:], stdout: out.String(), stderr: errb.String()}
	if werr != nil {
		r.code = watcher.ProcessState.ExitCode()
	}
	if r.code != 0 {
		t.Fatalf("watcher without inotify: want exit 0 after SIGTERM\n%s", r)
	}
	if n := countNames(t, q, done); n != 3 {
		t.Errorf("done/ holds %d of the 3 arrivals\n%s", n, r)
	}
	if got := strings.Count(r.stderr, `msg="no filesystem notifications; polling inbox/"`); got != 1 {
		t.Errorf("the fallback to polling logged %d times, want once\n%s", got, r.stderr)
	}
	if !strings.Contains(r.stderr, "too many open files") {
		t.Errorf("the log line does not say why there are no notifications\n%s", r.stderr)
	}
	requireEmpty(t, q, processing)
}
