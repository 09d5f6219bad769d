package spool

import (
	"testing"
	"time"

	"github.com/spoolq/spool/queue"
)

// TestBatchFileName: the name comes back out of a file identity, whatever
// colons it holds itself.
func TestBatchFileName(t *testing.T) {
	for _, name := range []string{"orders.csv", "a:b.csv", "2026-12-06T04:00:00.jsonl", ":", "x::"} {
		cl := &queue.Claim{Name: name, Ino: 42, Size: 1 << 20, Mtime: time.Unix(1765000000, 123)}
		if got := BatchFileName(batchFileID(cl)); got != name {
			t.Errorf("BatchFileName(%q) = %q, want %q", batchFileID(cl), got, name)
		}
	}
	if got := BatchFileName("no-colons"); got != "no-colons" {
		t.Errorf("an identity without colons gives %q, want it whole", got)
	}
}
