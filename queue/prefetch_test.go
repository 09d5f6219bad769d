//go:build linux

package queue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/spoolq/spool/internal/pagecache"
	"golang.org/x/sys/unix"
)

// dropCache writes names into inbox/, makes them durable and drops their
// data from the page cache. It skips the test where the filesystem keeps
// the data anyway (tmpfs).
func dropCache(t *testing.T, d *Dir, names []string, body string) {
	t.Helper()
	for _, n := range names {
		put(t, d, Inbox, n, body)
	}
	syscall.Sync()
	for _, n := range names {
		if err := pagecache.Evict(filepath.Join(d.StagePath(Inbox), n)); err != nil {
			t.Fatal(err)
		}
	}
	if cached(t, d, names[0]) {
		t.Skip("this filesystem keeps files in memory: nothing to read ahead")
	}
}

// cached reports whether the start of inbox/name is in the page cache,
// without reading it in (a read that does not wait may still start one).
func cached(t *testing.T, d *Dir, name string) bool {
	t.Helper()
	n, err := pagecache.Resident(filepath.Join(d.StagePath(Inbox), name))
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestPrefetchReadsAhead: Prefetch finds the files that left the page
// cache, counts them, and has the kernel read them back without reading
// them itself; files already cached count nothing.
func TestPrefetchReadsAhead(t *testing.T) {
	d := newQueue(t)
	var names []string
	for i := range 40 {
		names = append(names, fmt.Sprintf("m%03d.json", i))
	}
	body := `{"msg_id":"` + strings.Repeat("x", 200) + `"}`
	dropCache(t, d, names, body)
	// The kernel may keep a page it was busy with: count what left.
	left := 0
	for _, name := range names {
		if !cached(t, d, name) {
			left++
		}
	}
	if left == 0 {
		t.Skip("no file left the page cache")
	}
	if got := d.Prefetch(Inbox, names, 1<<20); got != left {
		t.Fatalf("Prefetch found %d cold files, want %d", got, left)
	}
	// The reads were only queued: wait until they land (or fail the test
	// after a deadline no healthy disk comes near).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := 0
		for _, name := range names {
			if cached(t, d, name) {
				n++
			}
		}
		if n == len(names) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d prefetched files in the page cache after 30s", n, len(names))
		}
	}
	if got := d.Prefetch(Inbox, names, 1<<20); got != 0 {
		t.Errorf("Prefetch of cached files found %d cold, want 0", got)
	}
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(d.StagePath(Inbox), name))
		if err != nil || string(data) != body {
			t.Fatalf("%s changed by Prefetch (err %v)", name, err)
		}
	}
}

// TestPrefetchOpensOnlyRegularFiles: a hostile drop folder's FIFOs,
// symlinks, directories, empty, oversized and vanished files are skipped
// without being opened or followed (inotify sees every open), and nothing
// is read: Prefetch only hints.
func TestPrefetchOpensOnlyRegularFiles(t *testing.T) {
	d := newQueue(t)
	inbox := d.StagePath(Inbox)
	if err := syscall.Mkfifo(filepath.Join(inbox, "fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(outside, []byte(`{"msg_id":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(inbox, "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(inbox, "dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	put(t, d, Inbox, "empty.json", "")
	put(t, d, Inbox, "big.json", strings.Repeat(" ", 2048))
	put(t, d, Inbox, "ok.json", `{"msg_id":"ok"}`)

	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	defer unix.Close(in)
	for _, p := range []string{inbox, outside} {
		if _, err := unix.InotifyAddWatch(in, p, unix.IN_OPEN|unix.IN_ACCESS); err != nil {
			t.Fatal(err)
		}
	}
	d.Prefetch(Inbox, []string{"fifo.json", "link.json", "dir.json", "empty.json", "big.json", "gone.json", "ok.json"}, 1024)

	// Only ok.json may have been opened, and nothing read.
	buf := make([]byte, 64<<10)
	n, err := unix.Read(in, buf)
	if err != nil {
		t.Fatalf("no inotify event: %v (ok.json should have been opened)", err)
	}
	var events []string
	for off := 0; off+unix.SizeofInotifyEvent <= n; {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
		if name == "" {
			name = "(the symlink's target)"
		}
		what := "open"
		if ev.Mask&unix.IN_ACCESS != 0 {
			what = "read"
		}
		events = append(events, what+" "+name)
		off += unix.SizeofInotifyEvent + int(ev.Len)
	}
	if len(events) != 1 || events[0] != "open ok.json" {
		t.Errorf("Prefetch did %v, want only [open ok.json]", events)
	}
}

// coldRounds reads rounds of freshly evicted files through read until one
// round counts at least one cold read, and returns that round's count and
// size. A read of an evicted file may succeed without waiting when the
// disk answers within the call (the count is an estimate, see ColdReads):
// under other processes' I/O a whole round of small files sometimes does,
// so a count stuck at zero round after round is what fails.
func coldRounds(t *testing.T, d *Dir, s *Session, body string, files int, read func(name string)) (int64, int) {
	t.Helper()
	for round := range 5 {
		var cold []string
		for i := range files {
			cold = append(cold, fmt.Sprintf("cold%d-%d.json", round, i))
		}
		dropCache(t, d, cold, body)
		before := s.ColdReads()
		for _, name := range cold {
			read(name)
		}
		if n := s.ColdReads() - before; n > 0 {
			return n, len(cold)
		}
		t.Logf("round %d: none of %d evicted files counted cold", round, len(cold))
	}
	// Is it the kernel? Ask it directly of one more evicted file.
	dropCache(t, d, []string{"probe.json"}, body)
	f, err := os.Open(filepath.Join(d.StagePath(Inbox), "probe.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = unix.Preadv2(int(f.Fd()), [][]byte{make([]byte, 512)}, 0, unix.RWF_NOWAIT)
	if errors.Is(err, unix.EAGAIN) {
		t.Fatalf("ColdReads stayed at %d over 5 rounds of %d evicted files, though the kernel refuses to read an evicted file without waiting", s.ColdReads(), files)
	}
	t.Skipf("the kernel read an evicted file without waiting (%v): the disk answers within the call, under other I/O, and there is no cold read to count", err)
	return 0, 0
}

// TestReadCountsColdFiles: claims whose data left the page cache count in
// ColdReads and still read whole; a cached one counts nothing.
func TestReadCountsColdFiles(t *testing.T) {
	d := newQueue(t)
	body := `{"msg_id":"a","payload":"` + strings.Repeat("y", 300) + `"}`
	put(t, d, Inbox, "warm.json", body)
	s, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	read := func(name string) {
		t.Helper()
		c, err := s.Claim(name)
		if err != nil {
			t.Fatal(err)
		}
		data, err := s.Read(c, 1<<20)
		if err != nil || string(data) != body {
			t.Fatalf("Read(%s) = %q, %v", name, data, err)
		}
		if _, err := s.Finish(c, Done); err != nil {
			t.Fatal(err)
		}
	}
	if n, of := coldRounds(t, d, s, body, 8, read); n > int64(of) {
		t.Fatalf("after reading %d evicted files: ColdReads counted %d", of, n)
	}
	n := s.ColdReads()
	read("warm.json") // written, never evicted: cached
	if got := s.ColdReads(); got != n {
		t.Errorf("reading a cached file moved ColdReads from %d to %d", n, got)
	}
}

// TestReadFailureKeepsCountingColdReads: a read that fails for one file
// (here a claimed file replaced by a directory before its Read) returns
// that file's error and leaves the probe on, so the cold reads after it
// are still counted; only a refused RWF_NOWAIT turns the probe off.
func TestReadFailureKeepsCountingColdReads(t *testing.T) {
	d := newQueue(t)
	body := `{"msg_id":"a","payload":"` + strings.Repeat("y", 300) + `"}`
	put(t, d, Inbox, "swapped.json", body)
	s, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer noWaitUnsupported.Store(false) // whatever happens, for the tests after this one
	c, err := s.Claim("swapped.json")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d.StagePath(Processing), s.ID(), c.Name)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(c, 1<<20); !errors.Is(err, unix.EISDIR) {
		t.Fatalf("Read of a claim replaced by a directory: err = %v, want EISDIR", err)
	}
	if noWaitUnsupported.Load() {
		t.Fatal("one file's failed read turned the RWF_NOWAIT probe off for the process")
	}
	read := func(name string) {
		t.Helper()
		c, err := s.Claim(name)
		if err != nil {
			t.Fatal(err)
		}
		if data, err := s.Read(c, 1<<20); err != nil || string(data) != body {
			t.Fatalf("Read(%s) = %q, %v", name, data, err)
		}
	}
	if n, of := coldRounds(t, d, s, body, 4, read); n > int64(of) {
		t.Fatalf("after a failed read and %d evicted files: ColdReads counted %d", of, n)
	}
}
