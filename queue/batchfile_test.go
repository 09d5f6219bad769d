//go:build linux

package queue

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
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
	got, err := d.Copies(Error, "orders~L3.csv", 4, sha256.Sum256([]byte("h\nr\n")))
	if err != nil {
		t.Fatal(err)
	}
	if want := []StoredCopy{{n1, ino1}, {n3, ino3}}; !slices.Equal(got, want) {
		t.Fatalf("Copies = %+v, want %+v", got, want)
	}
	if got, err := d.Copies(Error, "other.csv", 4, sha256.Sum256([]byte("h\nr\n"))); err != nil || len(got) != 0 {
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

// TestWriteStageFiles: several files written at once get the names,
// collision suffixes and inodes WriteStage would give them, in order,
// with their content, and no temp file is left in the queue directory.
func TestWriteStageFiles(t *testing.T) {
	d := newQueue(t)
	write := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	if _, _, err := d.WriteStage(Error, "a~L2.csv", write("old")); err != nil {
		t.Fatal(err)
	}
	got, err := d.WriteStageFiles(Error, []StageFile{
		{Name: "a~L2.csv", Fill: write("h\n2\n")},
		{Name: "a~L5.csv", Fill: write("h\n5\n")},
		{Name: "a~L5.csv", Fill: write("h\n5 again\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, content string }{{"a~L2~2.csv", "h\n2\n"}, {"a~L5.csv", "h\n5\n"}, {"a~L5~2.csv", "h\n5 again\n"}}
	if len(got) != len(want) {
		t.Fatalf("WriteStageFiles = %+v, want %d files", got, len(want))
	}
	for i, w := range want {
		p := filepath.Join(d.StagePath(Error), w.name)
		fi, err := os.Stat(p)
		if err != nil || got[i].Name != w.name {
			t.Fatalf("file %d: %+v, %v; want %s", i, got[i], err, w.name)
		}
		if ino := fi.Sys().(*syscall.Stat_t).Ino; ino != got[i].Ino {
			t.Errorf("file %d: inode %d, the file has %d", i, got[i].Ino, ino)
		}
		if b, _ := os.ReadFile(p); string(b) != w.content {
			t.Errorf("file %d: %q, want %q", i, b, w.content)
		}
	}
	ents, err := os.ReadDir(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), TempPrefix) {
			t.Errorf("temp file %s left", e.Name())
		}
	}
	fail := errors.New("no content")
	if _, err := d.WriteStageFiles(Error, []StageFile{{Name: "b~L1.csv", Fill: func(io.Writer) error { return fail }}}); !errors.Is(err, fail) {
		t.Fatalf("WriteStageFiles with a failing fill = %v, want %v", err, fail)
	}
}

// TestWriteStageFilesSyncedFirst: WriteStageFiles renames no file into
// the stage before every file of its group is synced, and returns only
// after the stage and the queue directory are synced; a failed file sync
// leaves nothing in the stage and no temp file, and a failed directory
// sync is returned, so that a dead letter is never recorded before its
// file is durable (I3).
func TestWriteStageFilesSyncedFirst(t *testing.T) {
	d := newQueue(t)
	names := []string{"c~L1.jsonl", "c~L2.jsonl", "c~L3.jsonl", "c~L4.jsonl", "c~L5.jsonl"}
	files := func() []StageFile {
		var fs []StageFile
		for _, n := range names {
			fs = append(fs, StageFile{Name: n, Fill: func(w io.Writer) error { _, err := io.WriteString(w, n+"\n"); return err }})
		}
		return fs
	}
	// inStage counts names' files in error/.
	inStage := func() int {
		n := 0
		for _, name := range names {
			if _, err := os.Lstat(filepath.Join(d.StagePath(Error), name)); err == nil {
				n++
			}
		}
		return n
	}
	noTemps := func() {
		t.Helper()
		ents, err := os.ReadDir(d.Path())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), TempPrefix) {
				t.Errorf("temp file %s left", e.Name())
			}
		}
	}
	realFile, realDir := syncFile, syncDir
	t.Cleanup(func() { syncFile, syncDir = realFile, realDir })

	var mu sync.Mutex
	var fileSyncs, dirSyncs int
	var early []string
	syncFile = func(f *os.File) error {
		mu.Lock()
		defer mu.Unlock()
		fileSyncs++
		if n := inStage(); n > 0 {
			early = append(early, fmt.Sprintf("file sync %d with %d files in error/ already", fileSyncs, n))
		}
		return realFile(f)
	}
	syncDir = func(fd int) error {
		mu.Lock()
		defer mu.Unlock()
		dirSyncs++
		if n := inStage(); n != len(names) {
			early = append(early, fmt.Sprintf("directory sync %d with %d of %d files in error/", dirSyncs, n, len(names)))
		}
		return realDir(fd)
	}
	if _, err := d.WriteStageFiles(Error, files()); err != nil {
		t.Fatal(err)
	}
	for _, e := range early {
		t.Error(e)
	}
	if fileSyncs != len(names) || dirSyncs != 2 {
		t.Errorf("%d file syncs and %d directory syncs, want %d and 2 (error/ and the queue directory)", fileSyncs, dirSyncs, len(names))
	}

	for _, name := range names {
		if err := os.Remove(filepath.Join(d.StagePath(Error), name)); err != nil {
			t.Fatal(err)
		}
	}
	fault := errors.New("injected sync fault")
	fileSyncs = 0
	syncFile = func(f *os.File) error {
		mu.Lock()
		defer mu.Unlock()
		if fileSyncs++; fileSyncs == 3 {
			return fault
		}
		return realFile(f)
	}
	syncDir = realDir
	if got, err := d.WriteStageFiles(Error, files()); !errors.Is(err, fault) || got != nil {
		t.Fatalf("WriteStageFiles with a file sync failing = %v, %v; want %v", got, err, fault)
	}
	if n := inStage(); n != 0 {
		t.Errorf("a file sync failed, yet %d files were renamed into error/", n)
	}
	noTemps()

	syncFile = realFile
	syncDir = func(fd int) error { return fault }
	if got, err := d.WriteStageFiles(Error, files()); !errors.Is(err, fault) || got != nil {
		t.Fatalf("WriteStageFiles with the directory sync failing = %v, %v; want %v", got, err, fault)
	}
	noTemps()
}

// TestNotTakenHint: of the names a queue never takes, the first that its
// case alone keeps out is named, by the queue's rule (NAME.json, or the
// one SetMessageNames gave); a name another way out has no hint.
func TestNotTakenHint(t *testing.T) {
	d := newQueue(t)
	if got := d.NotTakenHint([]string{"notes.txt", "M1.JSON"}); got != "names are case-sensitive: M1.JSON is not m1.json" {
		t.Errorf("NAME.json queue: %q", got)
	}
	d.SetMessageNames(func(_ Stage, name string) bool { return strings.HasSuffix(name, ".csv") }, "*.csv")
	if got := d.NotTakenHint([]string{"ORDERS.CSV"}); got != "names are case-sensitive: ORDERS.CSV is not orders.csv" {
		t.Errorf("*.csv queue: %q", got)
	}
	if got := d.NotTakenHint([]string{"orders.txt", "ORDERS.TXT", ".hidden.CSV"}); got != "" {
		t.Errorf("names out for another reason: %q", got)
	}
}
