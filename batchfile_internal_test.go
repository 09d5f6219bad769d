package spool

import (
	"testing"
	"time"

	"github.com/spoolq/spool/queue"
)

// TestBatchFileName: the name and the inode come back out of a file
// identity, whatever colons the name holds itself.
func TestBatchFileName(t *testing.T) {
	for _, name := range []string{"orders.csv", "a:b.csv", "2026-12-06T04:00:00.jsonl", ":", "x::", "1:2:3"} {
		cl := &queue.Claim{Name: name, Ino: 1<<63 + 42, Size: 1 << 20, Mtime: time.Unix(1765000000, 123)}
		id := batchFileID(cl)
		if got := BatchFileName(id); got != name {
			t.Errorf("BatchFileName(%q) = %q, want %q", id, got, name)
		}
		if got, ino, ok := SplitBatchFileID(id); got != name || ino != cl.Ino || !ok {
			t.Errorf("SplitBatchFileID(%q) = %q, %d, %v, want %q, %d, true", id, got, ino, ok, name, cl.Ino)
		}
	}
	for _, file := range []string{"no-colons", "a:1:2", "a:x:1:2", "a:-1:1:2"} {
		if got, _, ok := SplitBatchFileID(file); got != file || ok {
			t.Errorf("SplitBatchFileID(%q) = %q, %v, want it whole and not ok", file, got, ok)
		}
	}
}
