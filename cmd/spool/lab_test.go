package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spoolq/spool/ledger/sqlite"
)

// TestLab walks the lab's flow end to end, as its scripts would.
func TestLab(t *testing.T) {
	src := labSource(t)
	q := filepath.Join(t.TempDir(), "q")

	cli(t, "init", q, "--from", src).
		want(t, 0, "initialized "+q+"; copied 20 messages from "+src+" into inbox/\n")
	if n := len(names(t, filepath.Join(q, "inbox"))); n != 20 {
		t.Fatalf("inbox holds %d files after init, want 20", n)
	}
	if _, err := os.Stat(filepath.Join(q, "ledger.db")); err != nil {
		t.Fatalf("init made no ledger: %v", err)
	}

	r := cli(t, "schema", q)
	if r.code != 0 {
		t.Fatalf("schema: exit %d: %s", r.code, r.stderr)
	}
	golden(t, "lab-schema.csv", r.stdout)

	cli(t, "lag", q, "20").want(t, 0, "inbox=20 processing=0 error=0\n")
	cli(t, "lag", q, "19").want(t, 1, "inbox=20 processing=0 error=0\n")

	cli(t, "consume", q).want(t, 0, "processed=15 duplicates=3 dead-letters=2 recovered=0\n")
	if n := len(names(t, filepath.Join(q, "processing"))); n != 0 {
		t.Errorf("processing/ holds %d entries after a drain", n)
	}

	r = cli(t, "dups", q)
	r.want(t, 0, "EAI-20240611-000102\nEAI-20240611-000104\nEAI-20240611-000111\n")
	golden(t, "lab-dups.txt", r.stdout)

	r = cli(t, "errors", q)
	r.want(t, 0, "file,reason\n0019-ORD-1005-1.json,parse\n0020-ORD-1005-2.json,missing-field\n")
	golden(t, "lab-errors.csv", r.stdout)

	cli(t, "order-check", q).want(t, 0, "OK\n")

	cli(t, "lag", q, "0").want(t, 0, "inbox=0 processing=0 error=2\n")
	// The JSON reports' field names are a contract: the golden files hold
	// them, with the queue's path and the time made constant.
	r = cli(t, "lag", q, "0", "--json", "--max-age", "1h")
	r.want(t, 0, r.stdout)
	golden(t, "lab-lag.json", r.stdout)
	r = cli(t, "status", q, "--json")
	r.want(t, 0, r.stdout)
	status := strings.Replace(r.stdout, strconv.Quote(q), `"Q"`, 1)
	status = regexp.MustCompile(`"now": "[^"]+"`).ReplaceAllString(status, `"now": "NOW"`)
	golden(t, "lab-status.json", status)
	cli(t, "lag", q, "-1").wantFail(t, 2, "lag", "non-negative integer")
	cli(t, "lag", q, "x").wantFail(t, 2, "lag", "non-negative integer")
	cli(t, "lag", q, "1.5").wantFail(t, 2, "lag", "non-negative integer")
	cli(t, "lag", q).wantFail(t, 2, "lag", "missing THRESHOLD")

	// Replay: every refusal changes nothing but the audit, which records it.
	before := refusals(t, q)
	cli(t, "replay", q, "nope.json").wantFail(t, 1, "replay", "nope.json")
	cli(t, "replay", q, "../x.json").wantFail(t, 2, "replay", "path-like")
	cli(t, "replay", q, "error/0019-ORD-1005-1.json").wantFail(t, 2, "replay", "path-like")
	// Path-like is checked for every name before any existence check.
	cli(t, "replay", q, "nope.json", "../x.json").wantFail(t, 2, "replay", "path-like")
	// All or nothing: one missing name and nothing moves.
	cli(t, "replay", q, "0019-ORD-1005-1.json", "nope.json").wantFail(t, 1, "replay", "nope.json")
	cli(t, "replay", q, "0020-ORD-1005-2.json", "0019-ORD-1005-1.json", "x.txt").wantFail(t, 1, "replay", "x.txt")
	requireRefusedOnly(t, q, before)
	if got := replays(t, q); len(got) != 0 {
		t.Fatalf("a refused replay was recorded: %v", got)
	}

	cli(t, "replay", q, "0020-ORD-1005-2.json", "--by", "alice", "--note", "amount added upstream").
		want(t, 0, "replayed 0020-ORD-1005-2.json -> inbox/0020-ORD-1005-2.json\n")
	if got, want := names(t, filepath.Join(q, "error")), []string{"0019-ORD-1005-1.json"}; !slices.Equal(got, want) {
		t.Errorf("error/ = %v, want %v", got, want)
	}
	if got, want := names(t, filepath.Join(q, "inbox")), []string{"0020-ORD-1005-2.json"}; !slices.Equal(got, want) {
		t.Errorf("inbox/ = %v, want %v", got, want)
	}
	if got, want := replays(t, q), []string{"0020-ORD-1005-2.json>0020-ORD-1005-2.json by alice: amount added upstream"}; !slices.Equal(got, want) {
		t.Errorf("replays recorded %v, want %v", got, want)
	}
	cli(t, "lag", q, "0").want(t, 1, "inbox=1 processing=0 error=1\n")

	// Still without amount: it comes back as a dead letter, with its reason.
	cli(t, "consume", q).want(t, 0, "processed=0 duplicates=0 dead-letters=1 recovered=0\n")
	cli(t, "errors", q).want(t, 0, "file,reason\n0019-ORD-1005-1.json,parse\n0020-ORD-1005-2.json,missing-field\n")
	cli(t, "dups", q).want(t, 0, "EAI-20240611-000102\nEAI-20240611-000104\nEAI-20240611-000111\n")

	r = cli(t, "status", q)
	if r.code != 0 {
		t.Fatalf("status: exit %d: %s", r.code, r.stderr)
	}
	for _, line := range []string{
		"queue              " + q + "\n",
		"inbox              0\n",
		"done               18\n",
		"error              2 dead letters now\n",
		"ledger             15 processed, 3 duplicates, 3 dead letters ever\n",
		"dead letters ever  missing-field  2\n",
		"                   parse          1\n",
	} {
		if !strings.Contains(r.stdout, line) {
			t.Errorf("status lacks %q:\n%s", line, r.stdout)
		}
	}
}

// replays lists the replays recorded in the queue's ledger.
func replays(t *testing.T, q string) []string {
	t.Helper()
	l, err := sqlite.Open(context.Background(), filepath.Join(q, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rows, err := l.SQL().Query(`SELECT file, new_name, by_user, COALESCE(note, '') FROM replays ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var file, newName, by, note string
		if err := rows.Scan(&file, &newName, &by, &note); err != nil {
			t.Fatal(err)
		}
		out = append(out, file+">"+newName+" by "+by+": "+note)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
