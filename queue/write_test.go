//go:build linux

package queue

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReplaceFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.csv")
	write := func(s string) error {
		return ReplaceFile(path, func(w io.Writer) error {
			_, err := io.WriteString(w, s)
			return err
		})
	}
	for _, want := range []string{"first\n", "second\n"} {
		if err := write(want); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("content = %q, want %q", got, want)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, want 0644", fi.Mode().Perm())
	}
	if got := names(t, dir); strings.Join(got, ",") != "out.csv" {
		t.Errorf("directory holds %v, want only out.csv", got)
	}
}

func TestReplaceFileFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.csv")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := ReplaceFile(path, func(w io.Writer) error {
		if _, err := io.WriteString(w, "half"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "write "+path) {
		t.Fatalf("err = %v, want boom wrapped with the path", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("content = %q, want the old one", got)
	}
	if got := names(t, dir); strings.Join(got, ",") != "out.csv" {
		t.Errorf("directory holds %v, want the temp file removed", got)
	}
}

func TestReplaceFileMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "out.csv")
	err := ReplaceFile(path, func(io.Writer) error { return nil })
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

// A path that names a directory is refused, never taken for a file
// inside it.
func TestReplaceFileRefusesDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "out"), filepath.Join(dir, "out") + "/"} {
		if err := ReplaceFile(path, func(io.Writer) error { return nil }); err == nil {
			t.Errorf("ReplaceFile(%q) succeeded", path)
		}
	}
	if got := names(t, dir); strings.Join(got, ",") != "out" {
		t.Errorf("directory holds %v, want only out/", got)
	}
	if got := names(t, filepath.Join(dir, "out")); len(got) != 0 {
		t.Errorf("out/ holds %v, want nothing", got)
	}
}
