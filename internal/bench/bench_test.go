package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
