//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStaleTempFiles: the full-size temp file a kill -9'd spool enqueue
// leaves in inbox/ is counted by status and removed by the next enqueue
// and consume; a temp file whose writer still holds its lock is left
// alone, however old it looks.
func TestStaleTempFiles(t *testing.T) {
	for _, next := range []string{"enqueue", "consume"} {
		t.Run(next, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "q")
			mustRun(t, 0, "init", dir)
			inbox := filepath.Join(dir, "inbox")
			old := time.Now().Add(-time.Hour)
			stale := filepath.Join(inbox, ".spool-tmp-0123456789abcdef")
			if err := os.WriteFile(stale, make([]byte, 64<<10), 0o644); err != nil {
				t.Fatal(err)
			}
			live := filepath.Join(inbox, ".spool-tmp-fedcba9876543210")
			if err := os.WriteFile(live, []byte("half"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{stale, live} {
				if err := os.Chtimes(p, old, old); err != nil {
					t.Fatal(err)
				}
			}
			// A writer that is still alive holds its temp file's flock.
			f, err := os.Open(live)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
				t.Fatal(err)
			}

			st := mustRun(t, 0, "status", dir)
			if !strings.Contains(st.stdout, "temp files") || !strings.Contains(st.stdout, "2 (1 stale") {
				t.Fatalf("status does not count the temp files:\n%s", st)
			}
			var r result
			if next == "enqueue" {
				src := filepath.Join(t.TempDir(), "a.json")
				if err := os.WriteFile(src, []byte(`{"msg_id":"a","order_no":"o","seq":1,"amount":"1"}`), 0o644); err != nil {
					t.Fatal(err)
				}
				r = mustRun(t, 0, "enqueue", dir, src)
			} else {
				r = mustRun(t, 0, "consume", dir)
			}
			if _, err := os.Stat(stale); !os.IsNotExist(err) {
				t.Errorf("%s left the stale temp file (%v)\n%s", next, err, r)
			}
			if !strings.Contains(r.stderr, ".spool-tmp-0123456789abcdef") {
				t.Errorf("%s did not say it removed the stale temp file:\n%s", next, r)
			}
			if _, err := os.Stat(live); err != nil {
				t.Errorf("%s removed a temp file its writer still holds: %v", next, err)
			}
		})
	}
}
