package fsck

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/queue"
)

// TestWriteText: a line per finding, informational ones marked, examples
// escaped for the terminal, then the verdict with the command to run.
func TestWriteText(t *testing.T) {
	r := &Report{Queue: "/q", Findings: []Finding{
		{Kind: "orphan", Count: 2, Text: "2 files", Examples: []string{"a.json", "b\x1b.json"}},
		{Kind: "note", Info: true, Text: "fine"},
	}}
	var b bytes.Buffer
	r.WriteText(&b, "spool fsck /q")
	want := "orphan: 2 files; e.g. a.json, \"b\\x1b.json\"\ninfo note: fine\n" +
		"fsck /q: 1 kind of problem found (spool fsck /q --repair fixes what it can)\n"
	if b.String() != want {
		t.Errorf("wrote %q, want %q", b.String(), want)
	}
	b.Reset()
	(&Report{Queue: "/q"}).WriteText(&b, "spool fsck /q")
	if b.String() != "fsck /q: ok\n" {
		t.Errorf("wrote %q", b.String())
	}
}

// TestMissingLedger: a ledger file missing or empty is a finding that
// counts the files without their records; one with content is none.
func TestMissingLedger(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	if err := queue.Init(dir); err != nil {
		t.Fatal(err)
	}
	d, err := queue.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	path := filepath.Join(dir, "ledger.db")
	r := MissingLedger(d, path, true, "spool fsck q --db x")
	if r == nil || r.Problems() != 1 || r.Findings[0].Kind != "ledger-missing" ||
		!strings.Contains(r.Findings[0].Text, "does not exist (is --db right?)") {
		t.Fatalf("missing file: %+v", r)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := MissingLedger(d, path, false, "spool fsck q"); r == nil || !strings.Contains(r.Findings[0].Text, "is an empty file: 0 files in done/") {
		t.Fatalf("empty file: %+v", r)
	}
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := MissingLedger(d, path, false, "spool fsck q"); r != nil {
		t.Errorf("a file with content: %+v", r)
	}
}
