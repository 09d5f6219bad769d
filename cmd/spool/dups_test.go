package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
)

const conflictsHeader = "msg_id,processed_file,processed_hash,duplicate_file,duplicate_hash,at\n"

func sha(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

// TestDupsConflicts: a redelivery with another body under a processed
// msg_id is listed; a plain redelivery (same body) is not.
func TestDupsConflicts(t *testing.T) {
	q := newQueue(t)
	in := filepath.Join(q, "inbox")
	m1, m1evil := msg("m1", "O1", 1, `"10.00"`), msg("m1", "O1", 1, `"9999.00"`)
	m0, m0evil := msg("m0", "O0", 1, `"5"`), msg("m0", "O0", 2, `"5"`)
	write(t, filepath.Join(in, "a.json"), m1)
	write(t, filepath.Join(in, "b.json"), m0)
	cli(t, "consume", q).want(t, 0, "processed=2 duplicates=0 dead-letters=0 recovered=0\n")
	write(t, filepath.Join(in, "a-again.json"), m1)
	cli(t, "consume", q).want(t, 0, "processed=0 duplicates=1 dead-letters=0 recovered=0\n")
	cli(t, "dups", q, "--conflicts").want(t, 0, conflictsHeader)

	write(t, filepath.Join(in, "a-evil.json"), m1evil)
	cli(t, "consume", q).want(t, 0, "processed=0 duplicates=1 dead-letters=0 recovered=0\n")
	write(t, filepath.Join(in, "b-evil.json"), m0evil)
	cli(t, "consume", q).want(t, 0, "processed=0 duplicates=1 dead-letters=0 recovered=0\n")

	// dups keeps its output: distinct msg_ids, ascending.
	cli(t, "dups", q).want(t, 0, "m0\nm1\n")

	r := cli(t, "dups", q, "--conflicts")
	if r.code != 1 || r.stderr != "" {
		t.Errorf("dups --conflicts: exit %d, stderr %q; want 1 and nothing on stderr", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 3 || lines[0]+"\n" != conflictsHeader {
		t.Fatalf("dups --conflicts:\n%s", r.stdout)
	}
	for i, want := range []string{
		"m0,b.json," + sha(m0) + ",b-evil.json," + sha(m0evil) + ",",
		"m1,a.json," + sha(m1) + ",a-evil.json," + sha(m1evil) + ",",
	} {
		line := lines[i+1]
		at := line[strings.LastIndexByte(line, ',')+1:]
		if !strings.HasPrefix(line, want) {
			t.Errorf("row %d = %q, want %s<at>", i+1, line, want)
		}
		if ts, err := time.Parse(ledger.TimeLayout, at); err != nil || time.Since(ts) > time.Hour {
			t.Errorf("row %d at %q: %v", i+1, at, err)
		}
	}

	// -o writes the same, and the exit status still says there is one.
	out := filepath.Join(t.TempDir(), "conflicts.csv")
	if r := cli(t, "dups", q, "--conflicts", "-o", out); r.code != 1 || r.stdout != "" {
		t.Errorf("dups --conflicts -o: exit %d stdout %q", r.code, r.stdout)
	}
	if data, err := os.ReadFile(out); err != nil || string(data) != strings.Join(lines, "\n")+"\n" {
		t.Errorf("-o file: %q, %v", data, err)
	}
}
