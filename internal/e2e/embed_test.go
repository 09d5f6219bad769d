//go:build linux

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEmbedderBesideConsume runs examples/embed, a program written from
// go doc alone, on the queue a spool consume --watch consumes: it opens
// the queue with its spool.conf through queueopen.Open, takes part of the
// backlog, and no message is processed twice. Once spool.conf changes
// the key, the program is refused while the old consumer runs, before it
// claims anything, naming the key that differs.
func TestEmbedderBesideConsume(t *testing.T) {
	t.Parallel()
	q, state := workQueue(t)
	embed := filepath.Join(state, "embed")
	build := exec.Command("go", "build", "-o", embed, "github.com/spoolq/spool/examples/embed")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build examples/embed: %v\n%s", err, out)
	}
	runEmbed := func() (stdout, stderr string, code int) {
		t.Helper()
		var o, e bytes.Buffer
		cmd := exec.Command(embed, q)
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if x, ok := err.(*exec.ExitError); ok {
			return o.String(), e.String(), x.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), 0
	}

	const n = 300
	putMessages(t, q, 1, n, 0)
	// A slow handler, so that the watcher leaves work for the program.
	p := start(t, "consume", q, "--watch", "--exec", "sleep 0.02", "--concurrency", "1")
	lock := filepath.Join(q, "contract.lock")
	waitFor(t, 30*time.Second, "the watcher's contract", func() bool {
		b, _ := os.ReadFile(lock)
		return len(b) > 0
	})
	// And its first claim: on a loaded machine the program, started
	// first, could drain all n before the watcher's session began.
	waitFor(t, 30*time.Second, "the watcher's first claim", func() bool {
		return liveClaims(q) > 0 || len(messages(t, q, "done")) > 0
	})
	out, errs, code := runEmbed()
	if code != 0 {
		t.Fatalf("embed beside consume: exit %d\n%s", code, errs)
	}
	booked := strings.Count(out, "booked m-")
	ledger := filepath.Join(q, "ledger.db")
	waitFor(t, 60*time.Second, "every message processed", func() bool {
		return queryLedger(t, ledger, `SELECT count(*) FROM processed`) == n
	})
	// A message's row commits before its file moves to done/: the last
	// ones follow within the watcher's batch.
	waitFor(t, 30*time.Second, "every file in done/", func() bool {
		return len(messages(t, q, "done")) >= n
	})
	if got := len(messages(t, q, "done")); got != n {
		t.Errorf("done/ holds %d files, want %d", got, n)
	}
	if booked == 0 || booked == n {
		t.Errorf("the program booked %d of %d messages: want a share, beside the watcher", booked, n)
	}
	t.Logf("the program booked %d of %d, the watcher the rest", booked, n)

	// Another key in spool.conf: refused while the watcher runs msg_id.
	writeFile(t, q, "spool.conf", `{"key_field": "event_id"}`)
	// Stopped, the watcher cannot take late.json meanwhile.
	p.freeze(t)
	putMessage(t, q, "late.json", `{"event_id":"e1","msg_id":"late","order_no":"o","seq":1,"amount":"1"}`)
	out, errs, code = runEmbed()
	_, lateErr := os.Stat(filepath.Join(q, inbox, "late.json"))
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code != 1 || out != "" || !strings.Contains(errs, `key_field "msg_id" running, "event_id" here`) {
		t.Fatalf("embed with another key: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	if lateErr != nil {
		var where []string
		for _, pattern := range []string{"done/*late.json", "error/*late.json", "processing/*/*late.json"} {
			m, _ := filepath.Glob(filepath.Join(q, pattern))
			where = append(where, m...)
		}
		t.Errorf("the refused program moved late.json: %v (found: %q)", lateErr, where)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t); r.code != 0 {
		t.Fatalf("watcher: %s", r)
	}
}
