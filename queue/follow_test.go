//go:build linux

package queue

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
)

// TestFollow: a Follow counts the inbox/ its path names after a
// replacement, reports a stage gone until it is back, closes the
// directories it opened, and survives listings and checks running
// concurrently with replacements (go test -race).
func TestFollow(t *testing.T) {
	d := newQueue(t)
	openFDs := func() int {
		es, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	fdsBefore := openFDs()
	var reopened atomic.Int32
	f := NewFollow(d, func() { reopened.Add(1) })
	count := func() int {
		t.Helper()
		st, err := f.Stats(Inbox, true)
		if err != nil {
			t.Fatal(err)
		}
		return st.Messages
	}
	put(t, d, Inbox, "a.json", "{}")
	if n := count(); n != 1 {
		t.Fatalf("inbox: %d messages, want 1", n)
	}
	in := d.StagePath(Inbox)
	if err := os.Rename(in, in+".old"); err != nil {
		t.Fatal(err)
	}
	if err := f.CheckStages(); !errors.Is(err, ErrStageReplaced) {
		t.Fatalf("CheckStages with inbox/ gone: %v, want ErrStageReplaced", err)
	}
	if _, err := f.Stats(Inbox, false); !errors.Is(err, ErrStageReplaced) {
		t.Fatalf("Stats with inbox/ gone: %v, want ErrStageReplaced", err)
	}
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		put(t, d, Inbox, fmt.Sprintf("n%d.json", i), "{}")
	}
	if n := count(); n != 3 {
		t.Fatalf("inbox/ made anew with 3 messages: %d counted", n)
	}
	if reopened.Load() != 1 {
		t.Fatalf("reopened %d times, want 1", reopened.Load())
	}
	if err := f.CheckStages(); err != nil {
		t.Fatalf("CheckStages after following: %v", err)
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = f.Stats(Inbox, true)
				_ = f.CheckStages()
			}
		})
	}
	for i := range 20 {
		old := fmt.Sprintf("%s.%d", in, i)
		if err := os.Rename(in, old); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(in, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if n := count(); n != 0 {
		t.Fatalf("after the last replacement by an empty inbox/: %d counted", n)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Stats(Inbox, false); err != nil {
		t.Fatalf("the Dir given to NewFollow was closed by it: %v", err)
	}
	if n := openFDs(); n != fdsBefore {
		t.Errorf("%d descriptors open after Close, %d before NewFollow: the reopened directories leak", n, fdsBefore)
	}
}
