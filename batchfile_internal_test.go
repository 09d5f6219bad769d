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
		want := BatchFileID{Name: name, Ino: cl.Ino, Size: cl.Size, Mtime: cl.Mtime.UnixNano()}
		if got, ok := ParseBatchFileID(id); got != want || !ok {
			t.Errorf("ParseBatchFileID(%q) = %+v, %v, want %+v, true", id, got, ok, want)
		}
	}
	for _, file := range []string{"no-colons", "a:1:2", "a:x:1:2", "a:-1:1:2", "a:1:x:2", "a:1:2:x"} {
		if got, ok := ParseBatchFileID(file); got != (BatchFileID{}) || ok || BatchFileName(file) != file {
			t.Errorf("ParseBatchFileID(%q) = %+v, %v, want nothing and not ok, and BatchFileName the whole", file, got, ok)
		}
	}
}
