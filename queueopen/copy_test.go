package queueopen_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
)

// TestCopyMessages: the message files of the source are enqueued, a
// symbolic link followed; other names are left; a directory named as a
// message and a dangling link are skipped with their cause alone.
func TestCopyMessages(t *testing.T) {
	dir := newQueue(t)
	src := t.TempDir()
	for name, body := range map[string]string{"a.json": `{"msg_id":"a"}`, "b.json": `{"msg_id":"b"}`, "notes.txt": "x", ".hidden.json": "{}"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(src, "a.json"), filepath.Join(src, "c.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(src, "gone"), filepath.Join(src, "d.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "e.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := queue.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var skips []string
	copied, skipped, err := queueopen.CopyMessages(d, src, func(path string, why error) {
		skips = append(skips, filepath.Base(path)+": "+why.Error())
	})
	if err != nil || copied != 3 || skipped != 2 {
		t.Fatalf("copied %d, skipped %d, %v; want 3, 2, nil", copied, skipped, err)
	}
	if got := strings.Join(skips, "; "); got != "d.json: no such file or directory; e.json: not a regular file (directory)" {
		t.Errorf("skips %q", got)
	}
	inbox, err := os.ReadDir(filepath.Join(dir, "inbox"))
	if err != nil || len(inbox) != 3 {
		t.Errorf("inbox holds %d files, %v; want 3", len(inbox), err)
	}
	if _, _, err := queueopen.CopyMessages(d, filepath.Join(src, "none"), nil); err == nil || !strings.HasPrefix(err.Error(), "--from: ") {
		t.Errorf("a missing source: %v, want --from's error", err)
	}
}
