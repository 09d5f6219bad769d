//go:build linux

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestReportsReadOnly: every report works for a user who may only read
// the queue and its ledger (nobody, on a queue root owns with modes 0644
// and 0755), with and without a consumer running, and changes nothing;
// a ledger it may not read is refused in words of reading.
func TestReportsReadOnly(t *testing.T) {
	as := asNobody(t)
	base, err := os.MkdirTemp("", "spool-e2e-readonly-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(base, "q")
	mustRun(t, 0, "init", q)
	putMessage(t, q, "a.json", `{"msg_id":"a","order_no":"o","seq":1,"amount":"1"}`)
	putMessage(t, q, "b.json", `{"msg_id":"b","order_no":"o","seq":2,"amount":"1"}`)
	putMessage(t, q, "bad.json", `not json`)
	mustRun(t, 0, "consume", q)
	putMessage(t, q, "c.json", `{"msg_id":"c","order_no":"o","seq":3,"amount":"1"}`)

	reports := [][]string{
		{"status", q}, {"status", q, "--json"}, {"errors", q}, {"errors", q, "--json"},
		{"errors", q, "--group-by", "reason"}, {"dups", q}, {"dups", q, "--conflicts"},
		{"order-check", q}, {"schema", q}, {"lag", q, "10"}, {"replays", q}, {"replays", q, "--json"},
		{"audit", q}, {"audit", q, "--json"}, {"audit", q, "--since", "24h"},
	}
	// A running consumer renews its session's lease by touching its
	// directory in processing/ (every 40 s), and reads the ledger's pause
	// and holds every second, which marks its reads in -shm, SQLite's
	// index of the -wal: those are the consumer's changes, not the
	// reports'. (With no consumer there is no -shm: the idle run checks
	// that the reports make none.)
	consuming := false // a consumer runs beside the reports
	snapshot := func(t *testing.T) map[string]file {
		snap := treeSnapshot(t, q)
		for path, f := range snap {
			if filepath.Dir(path) == filepath.Join(q, "processing") && f.Mode.IsDir() {
				f.MTime = 0
				snap[path] = f
			}
		}
		shm := filepath.Join(q, "ledger.db-shm")
		if f, ok := snap[shm]; ok && consuming {
			f.MTime, f.Hash, f.Content = 0, "", ""
			snap[shm] = f
		}
		return snap
	}
	check := func(t *testing.T) {
		before := snapshot(t)
		for _, args := range reports {
			r := as.run(t, args...)
			if r.code != 0 || r.stderr != "" {
				t.Errorf("as nobody: %s", r)
			}
		}
		r := as.mustRun(t, 0, "status", q, "--json")
		var st struct {
			Ledger struct {
				Processed int `json:"processed"`
			} `json:"ledger"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Ledger.Processed < 2 {
			t.Errorf("status --json as nobody: %v processed=%d\n%s", err, st.Ledger.Processed, r.stdout)
		}
		serveReadOnly(t, as, q)
		if after := snapshot(t); !reflect.DeepEqual(before, after) {
			t.Errorf("the reports changed the queue:\nbefore %v\nafter  %v", before, after)
		}
	}
	t.Run("idle", check) // no -wal, no -shm: read immutable
	t.Run("consumer running", func(t *testing.T) {
		consuming = true
		p := start(t, "consume", q, "--watch")
		waitFor(t, 30*time.Second, "the consumer to take c.json with a -wal", func() bool {
			return countNames(t, q, "done") >= 3 && exists(filepath.Join(q, "ledger.db-wal"))
		})
		time.Sleep(300 * time.Millisecond) // the moves after the commit
		check(t)
		_ = p.cmd.Process.Signal(os.Interrupt)
		p.wait(t)
	})
	t.Run("ledger unreadable", func(t *testing.T) {
		if err := os.Chmod(filepath.Join(q, "ledger.db"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := as.run(t, "status", q)
		if r.code != 2 || !strings.Contains(r.stderr, "cannot be read") || strings.Contains(r.stderr, "records") {
			t.Errorf("an unreadable ledger: want exit 2 speaking of reading, got\n%s", r)
		}
	})
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// serveReadOnly runs spool serve as nobody and scrapes its metrics once.
func serveReadOnly(t *testing.T, as *unprivileged, q string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := as.command(ctx, "serve", q, "--listen", "127.0.0.1:0", "--log-format", "json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	addr := ""
	var lines []string
	for addr == "" && sc.Scan() {
		lines = append(lines, sc.Text())
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
			addr = rec.Addr
		}
	}
	if addr == "" {
		t.Fatalf("serve as nobody never listened:\n%s", strings.Join(lines, "\n"))
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("serve as nobody: /metrics %d", resp.StatusCode)
	}
}
