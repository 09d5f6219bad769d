package bench

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/spoolq/spool/internal/sample"
)

// TestSyscallCounter: the dirfd floor makes exactly six system calls a
// message (renameat, openat, read, the read that finds the end, close,
// renameat), so the counter must find six and a little of the runtime's
// (a few calls of its own per thousand messages), including the calls of
// threads started after the counter opened.
func TestSyscallCounter(t *testing.T) {
	sc, err := openSyscallCounter()
	if err != nil {
		t.Skipf("the system calls cannot be counted here: %v", err)
	}
	defer sc.Close()
	dir := filepath.Join(t.TempDir(), "q")
	const n = 2000
	if _, err := generate(dir, n, sample.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	run, err := floorDirfd(dir, sc)
	if err != nil {
		t.Fatal(err)
	}
	if !run.SyscallsSeen || run.N != n {
		t.Fatalf("counted %v over %d messages, want %d", run.SyscallsSeen, run.N, n)
	}
	if per := run.SyscallsPerMessage(); per < 6 || per > 6.5 {
		t.Errorf("dirfd floor: %.2f system calls a message, want 6 to 6.5", per)
	}

	// Threads started after the counter opened count too, even once
	// they have ended: 16 goroutines each locked to a thread of its own
	// at once need more threads than the runtime had, and a goroutine
	// that ends locked takes its thread with it.
	tasks := threads(t)
	before, err := sc.Count()
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 16, 200
	var ready, wg sync.WaitGroup
	ready.Add(goroutines)
	wg.Add(goroutines)
	peak := make(chan int, goroutines)
	for range goroutines {
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			ready.Done()
			ready.Wait()
			peak <- threads(t)
			for range each {
				syscall.Getppid()
			}
		}()
	}
	wg.Wait()
	after, err := sc.Count()
	if err != nil {
		t.Fatal(err)
	}
	close(peak)
	most := 0
	for p := range peak {
		most = max(most, p)
	}
	if most <= tasks {
		t.Fatalf("%d threads before, %d at most with %d locked goroutines: no new thread to test", tasks, most, goroutines)
	}
	if got := after - before; got < goroutines*each {
		t.Errorf("counted %d system calls, want at least the %d getppid calls of %d threads (%d new, ended since)",
			got, goroutines*each, goroutines, most-tasks)
	}
}

// threads is how many threads the process has.
func threads(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Error(err)
	}
	return len(es)
}

// TestSyscallsNote: a bench that cannot count says why, once, and still
// measures.
func TestSyscallsNote(t *testing.T) {
	saved := tracefsRoots
	tracefsRoots = []string{filepath.Join(t.TempDir(), "none")}
	defer func() { tracefsRoots = saved }()
	rep, err := Bench(t.Context(), Options{N: 50, Seed: 1, Parent: t.TempDir(), Syscalls: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.SyscallsNote, "mount tracefs") || rep.Rounds[0].Spool.SyscallsSeen {
		t.Errorf("note %q, seen %v: want the reason and no count", rep.SyscallsNote, rep.Rounds[0].Spool.SyscallsSeen)
	}
	var b strings.Builder
	rep.Write(&b, rep.Options)
	if !strings.Contains(b.String(), "syscalls   not counted: tracepoint") {
		t.Errorf("report without the note:\n%s", b.String())
	}
}
