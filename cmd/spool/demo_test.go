package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	r := cli(t, "demo", dir)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("demo: exit %d, stderr %q", r.code, r.stderr)
	}
	golden(t, "demo.txt", strings.ReplaceAll(r.stdout, dir, "$DIR"))

	// The queue it leaves answers the other commands the same way.
	cli(t, "dups", dir).want(t, 0, "EAI-20240611-000102\nEAI-20240611-000104\nEAI-20240611-000111\n")
	cli(t, "order-check", dir).want(t, 0, "OK\n")
	cli(t, "lag", dir, "0").want(t, 0, "inbox=0 processing=0 error=2\n")

	// Never into a directory that holds something.
	before := listing(t, dir)
	cli(t, "demo", dir).wantFail(t, 2, "demo", "not empty")
	if listing(t, dir) != before {
		t.Error("a refused demo changed the directory")
	}
	file := filepath.Join(t.TempDir(), "f")
	write(t, file, "x")
	cli(t, "demo", file).wantFail(t, 2, "demo", "not a directory")
	empty := t.TempDir()
	if r := cli(t, "demo", empty); r.code != 0 {
		t.Errorf("demo into an empty directory: exit %d %s", r.code, r.stderr)
	}
}

func TestDemoNoArguments(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	r := cli(t, "demo")
	if r.code != 0 {
		t.Fatalf("demo: exit %d, stderr %q", r.code, r.stderr)
	}
	first, _, _ := strings.Cut(r.stdout, "\n")
	dir, ok := strings.CutPrefix(first, "queue: ")
	if !ok || filepath.Dir(dir) != tmp || !strings.HasPrefix(filepath.Base(dir), "spool-demo-") {
		t.Fatalf("first line %q, want the new queue under %s", first, tmp)
	}
	if _, err := os.Stat(filepath.Join(dir, "ledger.db")); err != nil {
		t.Error(err)
	}
	golden(t, "demo.txt", strings.ReplaceAll(r.stdout, dir, "$DIR"))
}
