package main

import (
	"os"
	"path/filepath"
	"regexp"
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

// TestDemoCSV: demo --format csv runs the same sample as the rows of one
// CSV file: the same counts, the two poison rows dead letters of their
// own named after their lines, the file in done/, and a bad row replayed
// once fixed.
func TestDemoCSV(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	r := cli(t, "demo", dir, "--format", "csv")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("demo --format csv: exit %d, stderr %q", r.code, r.stderr)
	}
	// The age of the file's last commit depends on the machine's pace.
	out := regexp.MustCompile(`last commit \d+s ago`).ReplaceAllString(r.stdout, "last commit Ns ago")
	golden(t, "demo-csv.txt", strings.ReplaceAll(out, dir, "$DIR"))
	if names, err := os.ReadDir(filepath.Join(dir, "done")); err != nil || len(names) != 1 || names[0].Name() != "orders.csv" {
		t.Errorf("done/ holds %v (%v), want orders.csv", names, err)
	}
	bad := filepath.Join(dir, "error", "orders~L21.csv")
	data, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	write(t, bad, strings.Replace(string(data), ",order.paid,,CNY,", ",order.paid,88.00,CNY,", 1))
	cli(t, "replay", dir, "orders~L21.csv").want(t, 0, "replayed orders~L21.csv -> inbox/orders~L21.csv\n")
	if r := cli(t, "consume", dir); r.code != 0 || !strings.HasPrefix(r.stdout, "processed=1 duplicates=0 dead-letters=0") {
		t.Errorf("the fixed row: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	cli(t, "demo", dir, "--format", "xml").wantFail(t, 2, "demo", "--format")
}
