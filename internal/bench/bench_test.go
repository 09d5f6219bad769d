package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/pagecache"
	"github.com/spoolq/spool/queue"
)

func TestMedian(t *testing.T) {
	rounds := func(secs ...float64) Report {
		var r Report
		for _, s := range secs {
			r.Rounds = append(r.Rounds, Round{Spool: Run{N: 100, Elapsed: time.Duration(s * float64(time.Second))}})
		}
		return r
	}
	rate := func(r Round) float64 { return r.Spool.Rate() }
	for _, c := range []struct {
		secs []float64
		want float64
	}{
		{nil, 0},
		{[]float64{1}, 100},
		{[]float64{4, 1, 2}, 50},      // rates 25, 100, 50
		{[]float64{4, 1, 2, 0.5}, 75}, // rates 25, 100, 50, 200: mean of 50 and 100
	} {
		if got := rounds(c.secs...).Median(rate); got != c.want {
			t.Errorf("Median over %v s = %v, want %v", c.secs, got, c.want)
		}
	}
}

// TestEvict: after evict, the synced messages' pages have left the page
// cache, so a --cold drain really reads from the disk; the files are
// unchanged.
func TestEvict(t *testing.T) {
	dir := t.TempDir()
	if mem, err := pagecache.InMemory(dir); err != nil {
		t.Fatal(err)
	} else if mem {
		t.Skipf("%s is in memory: nothing to evict to", dir)
	}
	if err := queue.Init(dir); err != nil {
		t.Fatal(err)
	}
	inbox := filepath.Join(dir, string(queue.Inbox))
	page := os.Getpagesize()
	data := bytes.Repeat([]byte("x"), 3*page)
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(inbox, fmt.Sprintf("m%d.json", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	syscall.Sync()
	if n := resident(t, filepath.Join(inbox, "m0.json")); n == 0 {
		t.Fatalf("m0.json not in the page cache right after it was written; cannot test eviction")
	}
	if err := evict(dir); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		p := filepath.Join(inbox, fmt.Sprintf("m%d.json", i))
		if n := resident(t, p); n != 0 {
			t.Errorf("%s: %d of 3 pages still in the page cache after evict", p, n)
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s changed by evict (err %v)", p, err)
		}
	}
	if err := evict(filepath.Join(dir, "missing")); err == nil {
		t.Error("evict of a missing queue succeeded")
	}
}

func resident(t *testing.T, path string) int {
	t.Helper()
	n, err := pagecache.Resident(path)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestProcCPU: a live process's CPU time is read from /proc, and grows
// as it spends CPU; no PID, or one that is not running, gives none.
func TestProcCPU(t *testing.T) {
	t0, ok := procCPU(os.Getpid())
	if !ok {
		t.Fatal("this process's CPU time: none")
	}
	// Spin until a tick (10 ms) more is counted: on a loaded machine the
	// spinning may get little of the wall time.
	grew := false
	for end := time.Now().Add(10 * time.Second); !grew && time.Now().Before(end); {
		if t1, ok := procCPU(os.Getpid()); ok && t1 > t0 {
			grew = true
		}
	}
	if !grew {
		t.Errorf("after 10 s of spinning, still %v", t0)
	}
	if _, ok := procCPU(0); ok {
		t.Error("PID 0: a time")
	}
	if _, ok := procCPU(1 << 30); ok {
		t.Error("a PID with no process: a time")
	}
}

// TestRelayWriteBroker: the broker's CPU per event is printed under its
// round and the medians when both parts saw it, and not otherwise.
func TestRelayWriteBroker(t *testing.T) {
	run := func(server time.Duration) Run {
		return Run{N: 1000, Elapsed: time.Second, CPU: 5 * time.Millisecond, ServerCPU: server, ServerSeen: server > 0}
	}
	rep := RelayReport{Options: RelayOptions{N: 1000, Aggregates: 4}, Rounds: [][]RelayRound{
		{{Target: "nats://h/s", Relay: run(12 * time.Millisecond), Client: run(8 * time.Millisecond)}},
		{{Target: "nats://h/s", Relay: run(14 * time.Millisecond), Client: run(9 * time.Millisecond)}},
	}}
	var b strings.Builder
	rep.Write(&b)
	if got := strings.Count(b.String(), "broker cpu with the relay"); got != 3 {
		t.Errorf("%d broker lines, want 3 (two rounds, the medians):\n%s", got, b.String())
	}
	if !strings.Contains(b.String(), "with the relay  13.0µs/ev, with the client   8.5µs/ev") {
		t.Errorf("medians of the broker's CPU missing:\n%s", b.String())
	}
	rep.Rounds[0][0].Client.ServerSeen = false
	b.Reset()
	rep.Write(&b)
	if got := strings.Count(b.String(), "broker cpu"); got != 1 {
		t.Errorf("a round without the client's: %d broker lines, want the other round's:\n%s", got, b.String())
	}
}

// TestWriteFloorMedians: with several rounds, the medians end with each
// floor's own rate, CPU and system calls a message, spool's figures being
// read against them.
func TestWriteFloorMedians(t *testing.T) {
	run := func(name string, n int, cpu time.Duration, calls uint64) Run {
		return Run{Name: name, N: n, Elapsed: time.Second, CPU: cpu, Syscalls: calls, SyscallsSeen: true}
	}
	var rep Report
	for _, us := range []time.Duration{10, 30, 20} {
		rep.Rounds = append(rep.Rounds, Round{
			Spool:  run("spool", 100, 100*50*time.Microsecond, 630),
			Floors: []Run{run("floor (os)", 100, 100*us*time.Microsecond, 1300), run("floor (dirfd)", 100, 100*us*time.Microsecond/2, 600)},
		})
	}
	var b strings.Builder
	rep.Write(&b, Options{N: 100})
	for _, want := range []string{
		"median of 3 rounds: floor (os) 100 msg/s  cpu 20.0µs/msg  syscalls 13.0/msg\n",
		"median of 3 rounds: floor (dirfd) 100 msg/s  cpu 10.0µs/msg  syscalls 6.0/msg\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
}
