//go:build linux

package queue

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBatchFileHelpers: WriteStage gives the name and inode of what it
// wrote, a collision of "orders~L3.csv" keeping its extension last;
// Copies finds the files of a name's family with given bytes; Announce
// creates an empty file once and never replaces anything, a symlink
// included; Open opens a claimed regular file.
func TestBatchFileHelpers(t *testing.T) {
	d := newQueue(t)
	write := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	n1, ino1, err := d.WriteStage(Error, "orders~L3.csv", write("h\nr\n"))
	if err != nil || n1 != "orders~L3.csv" || ino1 == 0 {
		t.Fatalf("WriteStage = %q, %d, %v", n1, ino1, err)
	}
	n2, ino2, err := d.WriteStage(Error, "orders~L3.csv", write("h\nx\n"))
	if err != nil || n2 != "orders~L3~2.csv" || ino2 == ino1 {
		t.Fatalf("WriteStage of a taken name = %q, %d, %v; want orders~L3~2.csv", n2, ino2, err)
	}
	n3, ino3, err := d.WriteStage(Error, "orders~L3.csv", write("h\nr\n"))
	if err != nil || n3 != "orders~L3~3.csv" {
		t.Fatalf("WriteStage = %q, %v", n3, err)
	}
	got, err := d.Copies(Error, "orders~L3.csv", []byte("h\nr\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []StoredCopy{{n1, ino1}, {n3, ino3}}; !slices.Equal(got, want) {
		t.Fatalf("Copies = %+v, want %+v", got, want)
	}
	if got, err := d.Copies(Error, "other.csv", []byte("h\nr\n")); err != nil || len(got) != 0 {
		t.Fatalf("Copies of a free name = %+v, %v", got, err)
	}
	if ok, err := d.Announce(Inbox, "orders.csv.done"); err != nil || !ok {
		t.Fatalf("Announce = %v, %v; want it created", ok, err)
	}
	if fi, err := os.Lstat(filepath.Join(d.StagePath(Inbox), "orders.csv.done")); err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
		t.Fatalf("the announced file: %v, %v", fi, err)
	}
	if ok, err := d.Announce(Inbox, "orders.csv.done"); err != nil || ok {
		t.Fatalf("Announce of a name taken = %v, %v; want false, nil", ok, err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(d.StagePath(Inbox), "link.done")); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Announce(Inbox, "link.done"); err != nil || ok {
		t.Fatalf("Announce over a symlink = %v, %v; want false, nil", ok, err)
	}
	if fi, err := os.Lstat(filepath.Join(d.StagePath(Inbox), "link.done")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced: %v, %v", fi, err)
	}
	if err := os.WriteFile(filepath.Join(d.StagePath(Inbox), "big.csv"), []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := d.Join()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cl, err := s.Claim("big.csv")
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Open(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil || string(b) != "a\nb\n" {
		t.Fatalf("Open read %q, %v", b, err)
	}
	if !strings.HasSuffix(suffixed("a.json", 2), "~2.json") || suffixed("noext", 2) != "noext~2" {
		t.Errorf("suffixed: %q, %q", suffixed("a.json", 2), suffixed("noext", 2))
	}
}
