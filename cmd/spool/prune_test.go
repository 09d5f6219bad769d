package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// pruneQueue makes a queue whose ledger holds m1 (processed, then a
// duplicate), m2 and m3 processed, and a parse dead letter, with every row
// but m3's processed row dated 40 days ago.
func pruneQueue(t *testing.T) string {
	t.Helper()
	q := newQueue(t)
	in := filepath.Join(q, "inbox")
	write(t, filepath.Join(in, "1.json"), msg("m1", "O", 1, "1"))
	write(t, filepath.Join(in, "2.json"), msg("m2", "O", 2, "1"))
	write(t, filepath.Join(in, "3.json"), msg("m3", "O", 3, "1"))
	write(t, filepath.Join(in, "bad.json"), "not json")
	cli(t, "consume", q).want(t, 0, "processed=3 duplicates=0 dead-letters=1 recovered=0\n")
	write(t, filepath.Join(in, "1-again.json"), msg("m1", "O", 1, "1"))
	cli(t, "consume", q).want(t, 0, "processed=0 duplicates=1 dead-letters=0 recovered=0\n")
	old := time.Now().Add(-40 * 24 * time.Hour).UTC().Format(ledger.TimeLayout)
	withLedger(t, q, func(l *ledger.DB) {
		for _, stmt := range []string{
			`UPDATE processed SET processed_at = ? WHERE msg_id <> 'm3'`,
			`UPDATE deliveries SET at = ?`,
		} {
			if _, err := l.SQL().Exec(stmt, old); err != nil {
				t.Fatal(err)
			}
		}
	})
	return q
}

// ledgerRows lists the processed msg_ids and the deliveries' files and
// outcomes.
func ledgerRows(t *testing.T, q string) []string {
	t.Helper()
	var out []string
	withLedger(t, q, func(l *ledger.DB) {
		rows, err := l.SQL().Query(`SELECT 'processed ' || msg_id FROM processed
UNION ALL SELECT 'delivery ' || file || ' ' || outcome FROM deliveries`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	})
	slices.Sort(out)
	return out
}

var pruneLine = regexp.MustCompile(`^(pruned|would prune) (\d+) rows older than (\S+): processed=(\d+) deliveries=(\d+)\n` +
	`((?:kept|would keep) \d+ files in done/ \(\d+ bytes\) without their rows: spool prune \S+ --older-than \S+ --files removes them\n)?$`)

// wantPrune checks a prune's line of output (and the line of the files it
// keeps in done/, if any) and that its time is the window's edge.
func wantPrune(t *testing.T, r result, verb, total, processed, deliveries string, window time.Duration) {
	t.Helper()
	m := pruneLine.FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || m[1] != verb || m[2] != total || m[4] != processed || m[5] != deliveries {
		t.Fatalf("prune: exit %d, stdout %q, stderr %q; want %s %s rows: processed=%s deliveries=%s",
			r.code, r.stdout, r.stderr, verb, total, processed, deliveries)
	}
	edge, err := time.Parse(time.RFC3339, m[3])
	if err != nil || time.Since(edge.Add(window)).Abs() > time.Minute {
		t.Errorf("window edge %q: %v; want about now - %v", m[3], err, window)
	}
}

func TestPrune(t *testing.T) {
	q := pruneQueue(t)
	// A processed delivery is recorded by its processed row alone.
	all := []string{
		"delivery 1-again.json duplicate", "delivery bad.json dead-letter",
		"processed m1", "processed m2", "processed m3",
	}
	if got := ledgerRows(t, q); !slices.Equal(got, all) {
		t.Fatalf("fixture = %v", got)
	}
	before := listing(t, q)

	// Refusals change nothing.
	for _, tt := range []struct {
		args []string
		sub  string
	}{
		{[]string{"prune", q}, "missing --older-than"},
		{[]string{"prune", q, "--dry-run"}, "missing --older-than"},
		{[]string{"prune", q, "--older-than", ""}, "missing --older-than"},
		{[]string{"prune", q, "--older-than", "0s"}, "longer than zero"},
		{[]string{"prune", q, "--older-than", "-24h"}, "longer than zero"},
		{[]string{"prune", q, "--older-than", "30"}, "want a duration"},
		{[]string{"prune", q, "--older-than", "a month"}, "want a duration"},
		{[]string{"prune", q, "--older-than"}, "--older-than needs a value"},
		{[]string{"prune", "--older-than", "1d"}, "missing DIR"},
	} {
		cli(t, tt.args...).wantFail(t, 2, "prune", tt.sub)
	}
	if after := listing(t, q); after != before {
		t.Fatalf("a refused prune changed the queue")
	}

	// A dry run counts and removes nothing.
	wantPrune(t, cli(t, "prune", q, "--older-than", "30d", "--dry-run"), "would prune", "3", "2", "1", 30*24*time.Hour)
	if after := listing(t, q); after != before {
		t.Fatalf("a dry run changed the queue or the ledger")
	}
	// A window wider than the rows' age finds nothing.
	wantPrune(t, cli(t, "prune", q, "--older-than", "41d"), "pruned", "0", "0", "0", 41*24*time.Hour)

	r := cli(t, "prune", "--older-than", "30d", q)
	wantPrune(t, r, "pruned", "3", "2", "1", 30*24*time.Hour)
	// Without --files it says what it leaves in done/, and fsck knows
	// those files' rows were pruned, not lost.
	if !strings.Contains(r.stdout, "\nkept 3 files in done/ ") {
		t.Errorf("prune without --files: %q, want the 3 files it keeps named", r.stdout)
	}
	if r := cli(t, "fsck", q); r.code != 0 || !strings.Contains(r.stdout, "info kept-after-prune: 3 ") {
		t.Errorf("fsck after prune: exit %d\n%s", r.code, r.stdout)
	}
	// Left: m3's row (too recent) and the dead letter (never pruned).
	if got, want := ledgerRows(t, q), []string{"delivery bad.json dead-letter", "processed m3"}; !slices.Equal(got, want) {
		t.Errorf("after prune: %v, want %v", got, want)
	}
	cli(t, "errors", q).want(t, 0, "file,reason\nbad.json,parse\n")
	cli(t, "dups", q).want(t, 0, "")

	// The cost of the window: m1 sent again is processed again.
	write(t, filepath.Join(q, "inbox", "1-late.json"), msg("m1", "O", 1, "1"))
	cli(t, "consume", q).want(t, 0, "processed=1 duplicates=0 dead-letters=0 recovered=0\n")
}

// TestPruneKeepsClaimsInFlight: the rows of a claim still in processing/
// (its consumer died between the commit and the move) survive, so that
// recovery finds its outcome (I7).
func TestPruneKeepsClaimsInFlight(t *testing.T) {
	q := pruneQueue(t)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	session := filepath.Join(q, "processing", "0123456789ab-999999@"+host)
	if err := os.Mkdir(session, 0o755); err != nil {
		t.Fatal(err)
	}
	// Put 2.json (processed) and 1-again.json (a duplicate) back where
	// their crashed consumer would have left them, and make their ledger
	// records name these claims, as that consumer's commit did.
	for _, name := range []string{"2.json", "1-again.json"} {
		if err := os.Rename(filepath.Join(q, "done", name), filepath.Join(session, name)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := queue.Open(q)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := d.Claims()
	d.Close()
	if err != nil || len(claims) != 2 {
		t.Fatalf("claims in processing/ = %q, %v; want 2", claims, err)
	}
	withLedger(t, q, func(l *ledger.DB) {
		for _, c := range claims {
			for _, stmt := range []string{
				`UPDATE processed SET claim = ? WHERE msg_id = 'm2' AND ino = ?`,
				`UPDATE deliveries SET claim = ? WHERE file = '1-again.json' AND ino = ?`,
			} {
				ino := c[strings.IndexByte(c, ':')+1 : strings.LastIndexByte(c, ':')]
				if _, err := l.SQL().Exec(stmt, c, ino); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	wantPrune(t, cli(t, "prune", q, "--older-than", "30d"), "pruned", "1", "1", "0", 30*24*time.Hour)
	want := []string{"delivery 1-again.json duplicate", "delivery bad.json dead-letter", "processed m2", "processed m3"}
	if got := ledgerRows(t, q); !slices.Equal(got, want) {
		t.Errorf("after prune: %v, want %v", got, want)
	}
	// Recovery still finds both outcomes: both files go to done/, neither
	// is consumed again (I7).
	cli(t, "consume", q).want(t, 0, "processed=0 duplicates=0 dead-letters=0 recovered=2\n")
	if got := ledgerRows(t, q); !slices.Equal(got, want) {
		t.Errorf("after recovery: %v, want %v", got, want)
	}
	for _, name := range []string{"2.json", "1-again.json"} {
		if _, err := os.Stat(filepath.Join(q, "done", name)); err != nil {
			t.Errorf("recovered claim: %v", err)
		}
	}
}

func TestNewCommandsHelp(t *testing.T) {
	for cmd, want := range map[string]string{
		"prune":   "Usage: spool prune DIR --older-than DURATION [--files] [--dry-run] [--db PATH]\n",
		"backup":  "Usage: spool backup DIR --to FILE [--force] [--json] [--db PATH]\n",
		"replays": "Usage: spool replays DIR [-o FILE] [--json] [--db PATH]\n",
		"replay":  "Usage: spool replay DIR [FILE...] [--reason R] [--all] [--dry-run] [--force]",
		"errors":  "Usage: spool errors DIR [-o FILE] [--detail | --long | --json | --group-by reason]",
		"dups":    "Usage: spool dups DIR [-o FILE] [--conflicts] [--json] [--db PATH]\n",
	} {
		r := cli(t, "help", cmd)
		if r.code != 0 || !strings.HasPrefix(r.stdout, want) {
			t.Errorf("help %s: exit %d:\n%s", cmd, r.code, r.stdout)
		}
	}
	r := cli(t, "help")
	for _, line := range []string{"  replays DIR ", "  prune DIR --older-than DURATION ", "  replay DIR [FILE...] ", "  backup DIR --to FILE "} {
		if !strings.Contains(r.stdout, line) {
			t.Errorf("spool help lacks %q:\n%s", line, r.stdout)
		}
	}
}

func TestNewCommandsNotAQueue(t *testing.T) {
	plain := t.TempDir()
	for _, args := range [][]string{
		{"prune", plain, "--older-than", "30d"}, {"replays", plain}, {"replay", plain, "--all"},
		{"errors", plain, "--long"}, {"dups", plain, "--conflicts"},
	} {
		before := listing(t, plain)
		cli(t, args...).wantFail(t, 2, args[0], "not a queue directory")
		if after := listing(t, plain); after != before {
			t.Errorf("%v on a plain directory changed it:\n%s", args, after)
		}
	}
}
