//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMistakesRefused drives the ordinary mistakes of an operator that
// used to cost data or hang through the binary: each is exit 2 with a
// message that names the mistake, and none moves a message out of inbox/.
func TestMistakesRefused(t *testing.T) {
	const msgs = 3
	type setup func(t *testing.T, q, state string) []string
	for _, tc := range []struct {
		name  string
		setup setup
		want  []string // substrings of stderr
	}{
		{"exec program missing", func(t *testing.T, q, state string) []string {
			return []string{"consume", q, "--exec", filepath.Join(state, "typo", "handler.sh")}
		}, []string{`--exec`, "no such file or directory"}},
		{"exec program not in PATH", func(t *testing.T, q, state string) []string {
			return []string{"consume", q, "--exec", "spool-no-such-handler --flag"}
		}, []string{"spool-no-such-handler: not found in PATH"}},
		{"exec program not executable", func(t *testing.T, q, state string) []string {
			p := filepath.Join(state, "noexec.sh")
			if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"consume", q, "--exec", p}
		}, []string{"noexec.sh: permission denied"}},
		{"exec 127 at run time", func(t *testing.T, q, state string) []string {
			s := writeFile(t, state, "wrapper.sh", "#!/bin/sh\n"+filepath.Join(state, "gone", "prog")+"\n")
			return []string{"consume", q, "--exec", s, "--retry-base", "10ms"}
		}, []string{"exit status 127", "consume stopped", "back in inbox/"}},
		{"exec 126 at run time", func(t *testing.T, q, state string) []string {
			if err := os.WriteFile(filepath.Join(state, "noexec.sh"), []byte("#!/bin/sh\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s := writeFile(t, state, "wrapper.sh", "#!/bin/sh\n"+filepath.Join(state, "noexec.sh")+"\n")
			return []string{"consume", q, "--exec", s, "--retry-base", "10ms"}
		}, []string{"exit status 126", "consume stopped"}},
		{"replay unknown reason", func(t *testing.T, q, state string) []string {
			return []string{"replay", q, "--reason", "handlr"}
		}, []string{`--reason "handlr"`, "in error/ now: none", "handler", "retries-exhausted", "unknown"}},
		{"fsck spool.conf FIFO", func(t *testing.T, q, state string) []string {
			mkfifo(t, filepath.Join(q, "spool.conf"))
			return []string{"fsck", q}
		}, []string{"spool.conf: is a FIFO, not a regular file"}},
		{"consume spool.conf FIFO", func(t *testing.T, q, state string) []string {
			mkfifo(t, filepath.Join(q, "spool.conf"))
			return []string{"consume", q}
		}, []string{"spool.conf: is a FIFO, not a regular file"}},
		{"queue.id symlink", func(t *testing.T, q, state string) []string {
			id := filepath.Join(q, "queue.id")
			if err := os.Rename(id, filepath.Join(state, "queue.id")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(state, "queue.id"), id); err != nil {
				t.Fatal(err)
			}
			return []string{"status", q}
		}, []string{"queue.id: not a queue identity: it is a symlink"}},
		{"queue.id directory", func(t *testing.T, q, state string) []string {
			id := filepath.Join(q, "queue.id")
			if err := os.Remove(id); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(id, 0o755); err != nil {
				t.Fatal(err)
			}
			return []string{"consume", q}
		}, []string{"queue.id: not a queue identity: it is a directory"}},
		{"listen not an address", func(t *testing.T, q, state string) []string {
			return []string{"consume", q, "--listen", "1.2.3.4.5:9464"}
		}, []string{`"1.2.3.4.5" is not an IP address`}},
		{"listen bad bracket", func(t *testing.T, q, state string) []string {
			return []string{"serve", q, "--listen", "[::1:9464"}
		}, []string{`--listen "[::1:9464"`}},
		{"listen port out of range", func(t *testing.T, q, state string) []string {
			return []string{"consume", q, "--listen", "127.0.0.1:99999"}
		}, []string{`the port "99999"`}},
		{"db empty", func(t *testing.T, q, state string) []string {
			return []string{"status", q, "--db", ""}
		}, []string{`--db "": empty`}},
		{"db unknown scheme", func(t *testing.T, q, state string) []string {
			return []string{"consume", q, "--db", "mysqlx://root@127.0.0.1/spool"}
		}, []string{`--db "mysqlx://root@127.0.0.1/spool": unknown scheme "mysqlx"`, "postgres://"}},
		{"db sslmode bogus", func(t *testing.T, q, state string) []string {
			return []string{"status", q, "--db", "postgres://spool@127.0.0.1:1/spool?sslmode=bogus"}
		}, []string{"bad ledger address", "sslmode is invalid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, state := workQueue(t)
			for i := range msgs {
				putMessage(t, q, fmt.Sprintf("m%d.json", i), fmt.Sprintf(`{"msg_id":"m%d","order_no":"o","seq":%d,"amount":"1"}`, i, i+1))
			}
			args := tc.setup(t, q, state)
			cwd := t.TempDir() // where a file named after a bad --db would appear
			r := spoolAt{bin: spoolBin, cwd: cwd}.runWithin(t, 30*time.Second, args...)
			if r.code != 2 {
				t.Fatalf("want exit 2, got\n%s", r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 && !strings.Contains(tc.name, "at run time") {
				t.Errorf("want one line on stderr, got %d:\n%s", n+1, r.stderr)
			}
			if got := countNames(t, q, inbox); got != msgs {
				t.Errorf("inbox/ holds %d messages after the refusal, want all %d", got, msgs)
			}
			if got := countNames(t, q, errorStage); got != 0 {
				t.Errorf("error/ holds %d messages after the refusal, want none", got)
			}
			if des, _ := os.ReadDir(cwd); len(des) != 0 {
				t.Errorf("the refusal left %s in the working directory", des[0].Name())
			}
		})
	}
}

// TestContractOfLiveConsumers: a second consumer with another contract is
// refused while the first runs, naming the keys that differ; once none is
// alive the changed contract is taken and recorded.
func TestContractOfLiveConsumers(t *testing.T) {
	q, _ := workQueue(t)
	p := start(t, "consume", q, "--watch")
	lock := filepath.Join(q, "contract.lock")
	waitFor(t, 30*time.Second, lock+" written", func() bool {
		b, _ := os.ReadFile(lock)
		return len(b) > 0
	})
	putMessage(t, q, "a.json", `{"event_id":"e1","msg_id":"m1","order_no":"o","seq":1,"amount":"1"}`)
	r := run(t, "consume", q, "--key", "event_id")
	if r.code != 2 || !strings.Contains(r.stderr, `key_field "msg_id" running, "event_id" here`) {
		t.Fatalf("want exit 2 naming key_field, got\n%s", r)
	}
	// The same contract, written another way (required in another
	// order), joins.
	mustRun(t, 0, "consume", q, "--require", "seq,amount,order_no,msg_id")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := p.wait(t); r.code != 0 {
		t.Fatalf("watcher: %s", r)
	}
	mustRun(t, 0, "consume", q, "--key", "event_id")
	b, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"key_field":"event_id"`) || !strings.Contains(string(b), `"hash":"sha256:`) {
		t.Fatalf("%s after the changed contract ran: %s", lock, b)
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	_ = os.Remove(path)
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}
