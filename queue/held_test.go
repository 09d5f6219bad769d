//go:build linux

package queue

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestHeldOnOldQueue: a queue made before held/ existed opens, counts
// nothing held and releases nothing; its first hold makes held/ with the
// queue directory's permission bits (a consumer of the queue's group must
// set files aside into what an operator made), moves the file there and
// back under the name it had, suffixed on a collision.
func TestHeldOnOldQueue(t *testing.T) {
	root := filepath.Join(t.TempDir(), "q")
	if err := Init(root); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, string(Held))); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o770|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	d, err := Open(root)
	if err != nil {
		t.Fatalf("open a queue without held/: %v", err)
	}
	defer d.Close()
	if n, err := d.Count(Held); err != nil || n != 0 {
		t.Fatalf("Count(Held) = %d, %v; want 0", n, err)
	}
	if st, err := d.Stats(Held, true); err != nil || st.Messages != 0 {
		t.Fatalf("Stats(Held) = %+v, %v", st, err)
	}
	if _, err := d.Unhold("a.json", "a.json"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Unhold without held/: %v, want ErrNotHeld", err)
	}
	put(t, d, Inbox, "a.json", "{}")
	if _, err := d.Hold("b.json"); !errors.Is(err, ErrNotInInbox) {
		t.Fatalf("Hold of a name not in inbox/: %v, want ErrNotInInbox", err)
	}
	h, err := d.Hold("a.json")
	if err != nil || h.Name != "a.json" || h.Ino == 0 {
		t.Fatalf("Hold = %+v, %v", h, err)
	}
	fi, err := os.Stat(filepath.Join(root, string(Held)))
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode() & (os.ModePerm | os.ModeSetgid); got != 0o770|os.ModeSetgid {
		t.Errorf("held/ made with mode %v, want the queue directory's 2770", got)
	}
	if n, _ := d.Count(Held); n != 1 {
		t.Errorf("Count(Held) = %d after a hold, want 1", n)
	}
	put(t, d, Inbox, "a.json", "{} ") // a redelivery meanwhile
	back, err := d.Unhold("a.json", "a.json")
	if err != nil || back != "a~2.json" {
		t.Fatalf("Unhold = %q, %v; want a~2.json beside the redelivery", back, err)
	}
	if got := names(t, d.StagePath(Inbox)); len(got) != 2 {
		t.Errorf("inbox/ = %v, want both files", got)
	}
}
