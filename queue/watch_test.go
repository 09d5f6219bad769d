//go:build linux

package queue

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// rang reports whether the bell rings within d.
func rang(a *Arrivals, d time.Duration) bool {
	select {
	case <-a.Bell():
		return true
	case <-time.After(d):
		return false
	}
}

// TestArrivalsBell: a message renamed or created in inbox/ rings the bell;
// a temp file's life, a write to a message, and a claim do not.
func TestArrivalsBell(t *testing.T) {
	d := newQueue(t)
	a, err := d.WatchInbox()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := a.Close(); err != nil {
			t.Error(err)
		}
	}()
	in := d.StagePath(Inbox)
	tmp := filepath.Join(in, ".m1.json.tmp")
	if err := os.WriteFile(tmp, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if rang(a, 100*time.Millisecond) {
		t.Fatal("a temp file rang the bell")
	}
	if err := os.Rename(tmp, filepath.Join(in, "m1.json")); err != nil {
		t.Fatal(err)
	}
	if !rang(a, 10*time.Second) {
		t.Fatal("a message renamed in did not ring the bell")
	}
	s, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Claim("m1.json"); err != nil {
		t.Fatal(err)
	}
	if rang(a, 100*time.Millisecond) {
		t.Fatal("a claim rang the bell")
	}
	put(t, d, Inbox, "m2.json", `{}`)
	if !rang(a, 10*time.Second) {
		t.Fatal("a message written in place did not ring the bell")
	}
	if n := a.Overflowed(); n != 0 || a.Err() != nil {
		t.Errorf("Overflowed() = %d, Err() = %v, want 0 and nil", n, a.Err())
	}
}

// TestChanged: a file whose mtime is set back still counts as changed
// when its ctime says so (cp -p, touch -d).
func TestChanged(t *testing.T) {
	d := newQueue(t)
	put(t, d, Inbox, "m.json", `{}`)
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(d.StagePath(Inbox), "m.json"), old, old); err != nil {
		t.Fatal(err)
	}
	got, err := d.Changed(Inbox, "m.json")
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(got) > time.Minute {
		t.Errorf("Changed = %v (%v ago), want about now: the mtime was set back, the ctime was not", got, time.Since(got))
	}
	// An mtime in the future (a producer's clock ahead): the ctime counts,
	// or the file would wait for that future before --min-age took it.
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(d.StagePath(Inbox), "m.json"), future, future); err != nil {
		t.Fatal(err)
	}
	if got, err := d.Changed(Inbox, "m.json"); err != nil || got.After(time.Now().Add(time.Minute)) {
		t.Errorf("Changed with an mtime an hour ahead = %v, %v; want about now, from the ctime", got, err)
	}
	if _, err := d.Changed(Inbox, "gone.json"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Changed of a missing file: %v, want ENOENT", err)
	}
	if fs, remote, err := d.RemoteFS(); err != nil || remote {
		t.Errorf("RemoteFS of a temp dir = %q, %v, %v; want a local filesystem", fs, remote, err)
	}
}
