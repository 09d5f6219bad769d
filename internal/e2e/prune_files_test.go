package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// spool prune --files: the files of done/ go with their rows, nothing
// else does, fsck is clean after it, and a kill at any instant leaves
// nothing fsck calls lost.

// ageRows dates every processed row, and the processed and duplicate
// deliveries, 40 days back, past a 30d window; dead letters too, which
// prune never removes.
func ageRows(t testing.TB, path string) {
	t.Helper()
	old := time.Now().Add(-40 * 24 * time.Hour).UTC().Format("2006-01-02T15:04:05.000000Z")
	execLedger(t, path,
		`UPDATE processed SET processed_at = '`+old+`'`,
		`UPDATE deliveries SET at = '`+old+`'`)
}

// doneNames returns the names of a stage's messages with their inodes.
func doneNames(t testing.TB, q, stage string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, f := range messages(t, q, stage) {
		out[f.Name] = f.Ino
	}
	return out
}

var pruneLine = regexp.MustCompile(`^(pruned|would prune) (\d+) rows older than \S+: processed=(\d+) deliveries=(\d+) files=(\d+) bytes=(\d+)\n$`)

// pruneFiles runs spool prune --older-than 30d --files (and args) and
// returns its counts: rows, processed, deliveries, files, bytes.
func pruneFiles(t testing.TB, sp spoolAt, q string, args ...string) [5]int64 {
	t.Helper()
	r := sp.mustRun(t, 0, append([]string{"prune", q, "--older-than", "30d", "--files"}, args...)...)
	m := pruneLine.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("prune --files printed %q", r.stdout)
	}
	var out [5]int64
	for i := range out {
		out[i], _ = strconv.ParseInt(m[i+2], 10, 64)
	}
	return out
}

// TestPruneFiles: old messages (one of them delivered twice), dead
// letters, recent messages, and a file of done/ the ledger has no record
// of. prune --files --dry-run counts the old files and removes nothing;
// prune --files removes exactly the old messages' files and rows, leaves
// error/, the recent files and the unrecorded one; fsck then reports
// only the unrecorded file, and nothing once it is gone.
func TestPruneFiles(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	path := filepath.Join(q, "ledger.db")
	sp := spoolAt{bin: spoolBin}
	mustRun(t, 0, "init", q)
	const old, recent = 40, 20
	putMessages(t, q, 0, old, 0)
	putMessage(t, q, "again.json", orderMessage("m-00003", "o-00003", 1, "1.00"))
	for i := range 3 {
		putMessage(t, q, fmt.Sprintf("bad%d.json", i), "not json")
	}
	requireStats(t, "old", mustRun(t, 0, "consume", q), consumeStats{Processed: old, Duplicates: 1, DeadLetters: 3})
	oldFiles := doneNames(t, q, done)
	var oldBytes int64
	for _, f := range messages(t, q, done) {
		oldBytes += f.Size
	}
	ageRows(t, path)
	putMessages(t, q, old, recent, 0)
	requireStats(t, "recent", mustRun(t, 0, "consume", q), consumeStats{Processed: recent})
	recentFiles := doneNames(t, q, done)
	for n := range oldFiles {
		delete(recentFiles, n)
	}
	// A file in done/ with no record: the evidence of a lost row.
	if err := os.WriteFile(filepath.Join(q, done, "lost.json"), []byte(orderMessage("m-lost", "o", 1, "1.00")), 0o644); err != nil {
		t.Fatal(err)
	}
	errorsBefore := treeSnapshot(t, filepath.Join(q, errorStage))

	before := snapshot(t, q)
	dry := pruneFiles(t, sp, q, "--dry-run")
	if want := [5]int64{old + 1, old, 1, old + 1, oldBytes}; dry != want {
		t.Errorf("--dry-run counts %v, want %v (rows, processed, deliveries, files, bytes)", dry, want)
	}
	if d := diffSnapshots(before, snapshot(t, q)); len(d) > 0 {
		t.Errorf("--dry-run changed the queue: %q", d)
	}

	got := pruneFiles(t, sp, q)
	if want := [5]int64{old + 1, old, 1, old + 1, oldBytes}; got != want {
		t.Errorf("prune --files counts %v, want %v (rows, processed, deliveries, files, bytes)", got, want)
	}
	want := maps.Clone(recentFiles)
	want["lost.json"] = doneNames(t, q, done)["lost.json"]
	if left := doneNames(t, q, done); !maps.Equal(left, want) {
		t.Errorf("done/ holds %v, want the recent files and lost.json: %v", slices.Sorted(maps.Keys(left)), slices.Sorted(maps.Keys(want)))
	}
	if d := diffSnapshots(errorsBefore, treeSnapshot(t, filepath.Join(q, errorStage))); len(d) > 0 {
		t.Errorf("prune --files changed error/: %q", d)
	}
	if n := queryLedger(t, path, `SELECT COUNT(*) FROM processed`); n != recent {
		t.Errorf("processed holds %d rows, want the %d recent", n, recent)
	}
	if n := queryLedger(t, path, `SELECT COUNT(*) FROM deliveries WHERE outcome = 'dead-letter'`); n != 3 {
		t.Errorf("%d dead-letter records, want 3", n)
	}
	// One audit row, for the prune that removed something (a dry run
	// changes nothing and writes none), closed ok with its counts.
	requireAudit(t, path, "prune", []auditRow{{Outcome: "ok",
		Counts: map[string]int64{"processed": old, "deliveries": 1, "files": old + 1, "bytes": oldBytes}}})
	requireFindings(t, "fsck after prune --files", fsck(t, 1, q), map[string]int{"done-unrecorded": 1})
	if err := os.Remove(filepath.Join(q, done, "lost.json")); err != nil {
		t.Fatal(err)
	}
	requireFindings(t, "fsck without the unrecorded file", fsck(t, 0, q), nil)
	if again := pruneFiles(t, sp, q); again != [5]int64{} {
		t.Errorf("a second prune --files removed %v", again)
	}
}

// TestPruneFilesCrash is the crash test of spool prune --files: rounds of
// old messages (some delivered twice) beside recent ones and dead
// letters; each round's prune is SIGKILLed at an instant drawn uniformly
// over an uninterrupted prune's time, or aimed at its removals. After every kill: fsck finds
// nothing but rows whose file is gone (informational), no file of done/
// without its row, error/ and the recent files untouched; a second prune
// then completes it and fsck is clean, with done/ holding exactly the
// recent files. The quick run makes rounds of 80 messages until 3 kills
// hit a live prune, 2 of them inside its removals, one round in two
// aimed at them; SPOOL_TEST_LONG=1 rounds of 600 until 8 and 4, one in
// three aimed.
func TestPruneFilesCrash(t *testing.T) {
	t.Parallel()
	rng := newRand(t)
	perRound := testenv.Pick(600, 80)
	sp := spoolAt{bin: plainSpool(t)}
	q := filepath.Join(t.TempDir(), "q")
	path := filepath.Join(q, "ledger.db")
	sp.mustRun(t, 0, "init", q)
	for i := range 4 {
		putMessage(t, q, fmt.Sprintf("bad%d.json", i), "not json")
	}
	sp.mustRun(t, 0, "consume", q)
	errorsBefore := treeSnapshot(t, filepath.Join(q, errorStage))
	next := 0
	// fill consumes perRound messages (every tenth delivered twice) and
	// ages them, then consumes 20 recent ones, and returns the recent
	// files.
	fill := func() map[string]uint64 {
		putMessages(t, q, next, perRound, 0)
		for i := next; i < next+perRound; i += 10 {
			putMessage(t, q, fmt.Sprintf("again%05d.json", i), orderMessage(fmt.Sprintf("m-%05d", i), "o", 1, "1.00"))
		}
		next += perRound
		sp.mustRun(t, 0, "consume", q)
		ageRows(t, path)
		before := doneNames(t, q, done)
		putMessages(t, q, next, 20, 0)
		next += 20
		sp.mustRun(t, 0, "consume", q)
		recent := doneNames(t, q, done)
		for n := range before {
			delete(recent, n)
		}
		return recent
	}
	check := func(what string, recent map[string]uint64, complete bool) {
		t.Helper()
		left := doneNames(t, q, done)
		for n, ino := range recent {
			if left[n] != ino {
				t.Errorf("%s: the recent done/%s is gone", what, n)
			}
		}
		if d := diffSnapshots(errorsBefore, treeSnapshot(t, filepath.Join(q, errorStage))); len(d) > 0 {
			t.Errorf("%s: error/ changed: %q", what, d)
		}
		rep := sp.fsck(t, 0, q)
		for kind, n := range rep.kinds() {
			if kind != "processed-without-file" || complete {
				t.Errorf("%s: fsck finds %s (%d)", what, kind, n)
			}
		}
		if complete {
			if len(left) != len(recent) {
				t.Errorf("%s: done/ holds %d files, want the %d recent", what, len(left), len(recent))
			}
			if n := queryLedger(t, path, `SELECT COUNT(*) FROM processed`); n != len(recent) {
				t.Errorf("%s: %d processed rows, want %d", what, n, len(recent))
			}
		}
	}

	recent := fill()
	t0 := time.Now()
	if got := pruneFiles(t, sp, q); got[3] != int64(perRound+perRound/10) {
		t.Fatalf("an uninterrupted prune removed %v, want %d files", got, perRound+perRound/10)
	}
	span := time.Since(t0)
	check("an uninterrupted prune", recent, true)
	t.Logf("an uninterrupted prune of %d files takes %v", perRound+perRound/10, span)

	// The rounds kill blind, at an instant drawn over a whole prune
	// (mostly its start and its reading of the ledger), but one in
	// aimEvery, which aims at the removals: it kills within 0.2 ms of the
	// first file's going.
	minKills, minInside := testenv.Pick(8, 3), testenv.Pick(4, 2)
	aimEvery := testenv.Pick(3, 2)
	phases := map[string]int{}
	kills := 0
	for round := 0; kills < minKills || phases["some files removed"]+phases["files removed, rows left"] < minInside; round++ {
		if round > 6*minKills {
			t.Fatalf("after %d rounds, %d kills hit a live prune, in phases %v", round, kills, phases)
		}
		recent = fill()
		oldCount := len(doneNames(t, q, done)) - len(recent)
		p := sp.start(t, "prune", q, "--older-than", "30d", "--files")
		var delay time.Duration
		blind := round%aimEvery != aimEvery-1
		if blind {
			delay = time.Duration(rng.Int64N(int64(span) + 1))
		} else {
			waitForRemoval(t, p, filepath.Join(q, done), oldCount+len(recent))
			// The removals of a quick round take well under a
			// millisecond on a fast machine: a kill drawn over 2 ms
			// landed after them more often than not.
			delay = time.Duration(rng.Int64N(int64(200 * time.Microsecond)))
		}
		alive := p.killAfter(t, delay)
		if !alive {
			if r := p.result(); r.code != 0 {
				t.Fatalf("round %d: prune exited by itself with a failure\n%s", round, r)
			}
		} else {
			kills++
		}
		left := len(doneNames(t, q, done)) - len(recent)
		rows := queryLedger(t, path, `SELECT COUNT(*) FROM processed`) - len(recent)
		phase := "nothing removed"
		switch {
		case left > 0 && left < oldCount:
			phase = "some files removed"
		case left == 0 && rows > 0:
			phase = "files removed, rows left"
		case left == 0:
			phase = "complete"
		}
		if alive {
			phases[phase]++
		}
		what := fmt.Sprintf("round %d (blind %v, killed %v after %v: %s, %d old files and %d old rows left)", round, blind, alive, delay, phase, left, rows)
		check(what, recent, phase == "complete")
		pruneFiles(t, sp, q)
		check(what+", then pruned again", recent, true)
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("%d kills hit a live prune, leaving %v", kills, phases)
}

// waitForRemoval polls dir until it holds fewer than n names, or p exits.
func waitForRemoval(t *testing.T, p *proc, dir string, n int) {
	t.Helper()
	waitForNames(t, p, dir, fmt.Sprintf("fewer than %d names", n), func(names []string) bool { return len(names) < n })
}

// auditRow is a row of the ledger's audit table, as the tests compare it.
type auditRow struct {
	Outcome string
	Counts  map[string]int64
}

// requireAudit checks the audit rows of action in the SQLite ledger at
// path, in order: each by the OS user on the command line, with its
// outcome and counts.
func requireAudit(t testing.TB, path, action string, want []auditRow) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT actor, via, outcome, counts, ended_at IS NOT NULL FROM spool_audit WHERE action = ? ORDER BY id`, action)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []auditRow
	for rows.Next() {
		var (
			actor, via, outcome, counts string
			ended                       bool
		)
		if err := rows.Scan(&actor, &via, &outcome, &counts, &ended); err != nil {
			t.Fatal(err)
		}
		r := auditRow{Outcome: outcome}
		if err := json.Unmarshal([]byte(counts), &r.Counts); err != nil {
			t.Fatalf("audit counts %q: %v", counts, err)
		}
		if actor == "" || via != "cli" || ended != (outcome != "started") {
			t.Errorf("audit row of %s: actor %q, via %q, outcome %s, ended %v", action, actor, via, outcome, ended)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("audit rows of %s: %+v, want %+v", action, got, want)
	}
}
