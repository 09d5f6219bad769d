package spool

import (
	"path/filepath"
	"testing"

	"github.com/spoolq/spool/queue"
)

// TestPrefetcherOffersOnlyAfterColdFiles: a chunk is handed to the
// prefetcher only when files were found cold since the chunk before, so a
// warm backlog costs no read-ahead at all; and offering never waits on a
// prefetcher that has a chunk queued already.
func TestPrefetcherOffersOnlyAfterColdFiles(t *testing.T) {
	root := filepath.Join(t.TempDir(), "q")
	if err := queue.Init(root); err != nil {
		t.Fatal(err)
	}
	d, err := queue.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A prefetcher whose goroutine is not running: offered chunks stay in
	// its channel, where the test sees them.
	p := &prefetcher{s: s, chunks: make(chan []string, 1)}
	pending := func() int { return len(p.chunks) }

	p.offer([]string{"a.json"})
	if pending() != 0 {
		t.Fatal("a chunk was offered before any file was found cold")
	}
	p.cold.Add(3) // the prefetcher met cold files in the chunk before
	p.offer([]string{"b.json"})
	if pending() != 1 {
		t.Fatal("no chunk offered after cold files were found")
	}
	p.cold.Add(1)
	p.offer([]string{"c.json"}) // b.json's chunk still queued: skipped, not waited for
	if got := <-p.chunks; len(got) != 1 || got[0] != "b.json" {
		t.Fatalf("prefetched %v, want [b.json]", got)
	}
	p.offer([]string{"d.json"})
	if pending() != 0 {
		t.Fatal("a chunk was offered though no file was found cold since the last offer")
	}
}
