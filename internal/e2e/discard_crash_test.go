//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// TestDiscardCrash is the crash test of spool discard: each round puts a
// fresh set of dead letters into error/, and spool discard --all (every
// other round with --to) is SIGKILLed at a random instant, drawn over the
// time an uninterrupted discard takes (one round in three), or soon
// after its first staging name appears or its first staged file leaves
// error/ (the others, in turn: the moves are a small part of the whole,
// and the pending and staged phases a few milliseconds each); then fsck --repair or the next discard completes it. After
// each kill every letter is either still in error/ (under its name, or
// staged under its batch's hidden name, with the batch pending or
// staged) or gone with its batch recorded (staged or done); never
// elsewhere, never in two places, never gone unrecorded. After the
// completion every letter of the round is gone, recorded once as
// deleted or moved (with its bytes in the --to directory), with its
// body's hash, and fsck is clean, counting every discard so far.
//
// The quick run discards 60 letters a round through at least 3 kills;
// SPOOL_TEST_LONG=1 1000 through 28. Under -race it runs a plain build of
// spool (plainSpool), as TestReplayCrash does.
func TestDiscardCrash(t *testing.T) {
	t.Parallel()
	rng := newRand(t)
	letters := testenv.Pick(300, 60)
	minBlind, minAimed := testenv.Pick(6, 1), testenv.Pick(8, 2)
	// A bound for a stalled machine; the spans the kills are drawn over
	// are taken again whenever a run finishes before its kill.
	budget := 8 * time.Minute
	began := time.Now()

	sp := spoolAt{bin: plainSpool(t)}
	base := t.TempDir()
	q := filepath.Join(base, "q")
	kept := filepath.Join(base, "kept")
	if err := os.Mkdir(kept, 0o750); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(q, "ledger.db")
	sp.mustRun(t, 0, "init", q)

	discarded := 0 // letters discarded in all rounds so far
	fill := func(round int) map[string]uint64 {
		for i := range letters {
			name := fmt.Sprintf("r%02d-p%04d.json", round, i)
			putMessage(t, q, name, "not json "+name)
		}
		requireStats(t, "poison", sp.mustRun(t, 0, "consume", q), consumeStats{DeadLetters: letters})
		ino := map[string]uint64{}
		for _, f := range messages(t, q, errorStage) {
			ino[f.Name] = f.Ino
		}
		if len(ino) != letters {
			t.Fatalf("round %d: error/ holds %d dead letters, want %d", round, len(ino), letters)
		}
		return ino
	}
	args := func(round int) []string {
		a := []string{"discard", q, "--all", "--note", fmt.Sprintf("round %d", round)}
		if round%2 == 1 {
			a = append(a, "--to", kept)
		}
		return a
	}

	// An uninterrupted discard, timed, in all and from its first staging
	// name to its exit.
	ino := fill(0)
	t0 := time.Now()
	p := sp.start(t, args(0)...)
	first, staged := waitForErrorStage(t, p, q, "a discard's first staging", staging(".spool-discard-"))
	r := p.wait(t)
	span := time.Since(t0)
	moves := time.Millisecond
	if staged {
		moves = max(moves, time.Since(first))
	}
	if r.code != 0 || len(lines(r.stdout)) != letters {
		t.Fatalf("an uninterrupted discard: want exit 0 and %d lines\n%s", letters, r)
	}
	discarded += letters
	checkDiscarded(t, sp, q, path, kept, 0, ino, false, discarded)
	requireOneMoveTasks(t, sp, q, "an uninterrupted discard", "discard", 1, letters)
	t.Logf("an uninterrupted discard of %d dead letters takes %v, %v of it from the first staging", letters, span, moves)

	phases := map[string]int{}
	blind, aimed := 0, 0
	for round := 1; blind < minBlind || aimed < minAimed || phases["pending"] == 0 || phases["staged"] == 0; round++ {
		if time.Since(began) > budget {
			t.Fatalf("after %d rounds in %v: %d blind and %d aimed kills hit a live discard, phases %v", round, time.Since(began).Round(time.Second), blind, aimed, phases)
		}
		ino := fill(round)
		// Two rounds in three are aimed: at the first staging name (the
		// batch pending), then at the first file released (staged).
		isBlind := round%3 == 0
		aim, ready := "the first staging", staging(".spool-discard-")
		if round%3 == 2 {
			aim, ready = "the first release", releasing(".spool-discard-", letters)
		}
		t0 := time.Now()
		p := sp.start(t, args(round)...)
		alive := false
		var delay time.Duration
		if isBlind {
			delay = time.Duration(rng.Int64N(int64(span) + 1))
			if alive = p.killAfter(t, delay); !alive {
				// It finished before the kill: the machine is faster
				// now than when span was taken, so take it again.
				span = time.Since(t0)
			}
		} else if first, ok := waitForErrorStage(t, p, q, aim, ready); ok {
			// The staging, its commit and the removals take a few
			// milliseconds of the moves' window, the rest is the commit
			// of done and the exit: the kill is drawn over the first
			// tenth of it after the instant aimed at, where they are.
			delay = time.Duration(rng.Int64N(int64(moves)/10 + 1))
			if alive = p.killAfter(t, delay); !alive {
				moves = max(time.Since(first), time.Millisecond)
			}
		}
		if !alive {
			if r := p.result(); r.code != 0 {
				t.Fatalf("round %d: discard exited by itself with a failure\n%s", round, r)
			}
		} else if isBlind {
			blind++
		} else {
			aimed++
		}
		phase := observeDiscard(t, q, path, kept, round, ino)
		phases[phase]++
		if !alive && phase != "done" {
			t.Errorf("round %d: discard exited by itself with its batch %s", round, phase)
		}
		if isBlind {
			aim = "blind"
		}
		what := fmt.Sprintf("round %d (%s, killed %v after %v, phase %s)", round, aim, alive, delay, phase)
		if round%2 == 0 {
			r := sp.mustRun(t, 0, "fsck", q, "--repair")
			if phase == "pending" || phase == "staged" {
				if !strings.Contains(r.stdout, "repaired discard ") {
					t.Errorf("%s: fsck --repair does not say it finished the discard\n%s", what, r)
				}
			}
			if phase == "none" {
				// Nothing was recorded, nothing removed: discard now.
				sp.mustRun(t, 0, args(round)...)
			}
		} else {
			r := sp.mustRun(t, 0, args(round)...)
			if (phase == "pending" || phase == "staged") && !strings.Contains(r.stderr, "finished discard ") {
				t.Errorf("%s: the next discard does not say it finished the killed one\n%s", what, r)
			}
		}
		discarded += letters
		checkDiscarded(t, sp, q, path, kept, round, ino, round%2 == 1, discarded)
		requireOneMoveTasks(t, sp, q, what, "discard", round+1, letters)
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("%d blind and %d aimed kills left phases %v in %v", blind, aimed, phases, time.Since(began).Round(time.Millisecond))
}

// inodesAt maps each inode of the queue's stages and of kept to the
// places it is at.
func inodesAt(t *testing.T, q, kept string) map[uint64][]string {
	t.Helper()
	out := map[uint64][]string{}
	dirs := map[string]string{"kept": kept}
	for _, s := range []string{inbox, processing, done, errorStage} {
		dirs[s] = filepath.Join(q, s)
	}
	for label, dir := range dirs {
		des, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range des {
			fi, err := de.Info()
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() {
				continue
			}
			i := fi.Sys().(*syscall.Stat_t).Ino
			out[i] = append(out[i], label+"/"+de.Name())
		}
	}
	return out
}

// observeDiscard reads what a killed discard of round left, and checks
// that each letter is where its batch's state allows; it returns the
// phase: none (no batch), pending, staged or done.
func observeDiscard(t *testing.T, q, path, kept string, round int, ino map[string]uint64) string {
	t.Helper()
	db := openLedgerRW(t, path)
	defer db.Close()
	note := fmt.Sprintf("round %d", round)
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM discard_batches WHERE note = ?`, note).Scan(&n); err != nil {
		t.Fatal(err)
	}
	phase, id := "none", int64(0)
	switch n {
	case 0:
	case 1:
		if err := db.QueryRow(`SELECT id, state FROM discard_batches WHERE note = ?`, note).Scan(&id, &phase); err != nil {
			t.Fatal(err)
		}
		var items int
		if err := db.QueryRow(`SELECT COUNT(*) FROM discards WHERE batch_id = ?`, id).Scan(&items); err != nil {
			t.Fatal(err)
		}
		if items != len(ino) {
			t.Errorf("round %d: batch %d (%s) holds %d items, want all %d letters", round, id, phase, items, len(ino))
		}
	default:
		t.Fatalf("round %d: one discard made %d batches", round, n)
	}
	// The audit row is committed before the batch: a batch without one
	// is a change the audit missed.
	var audited int
	if err := db.QueryRow(`SELECT COUNT(*) FROM spool_audit WHERE action = 'discard' AND selection LIKE ?`, `%"note":"`+note+`"%`).Scan(&audited); err != nil {
		t.Fatal(err)
	}
	if phase != "none" && audited != 1 {
		t.Errorf("round %d: batch %s with %d audit rows of its discard, want 1", round, phase, audited)
	}
	at := inodesAt(t, q, kept)
	counts := map[string]int{}
	for name, i := range ino {
		places := at[i]
		kind := "gone"
		switch {
		case len(places) > 1:
			t.Errorf("round %d: %s is in %d places after a kill in phase %s: %q", round, name, len(places), phase, places)
			continue
		case len(places) == 0:
		case places[0] == "error/"+name:
			kind = "error"
		case strings.HasPrefix(places[0], fmt.Sprintf("error/.spool-discard-%d-", id)):
			kind = "staged"
		case places[0] == "kept/"+name:
			kind = "gone" // moved out of the queue, as --to asks
		default:
			t.Errorf("round %d: %s is at %s after a kill in phase %s", round, name, places[0], phase)
		}
		counts[kind]++
	}
	allowed := map[string]map[string]bool{
		"none":    {"error": true},
		"pending": {"error": true, "staged": true},
		"staged":  {"staged": true, "gone": true},
		"done":    {"gone": true},
	}[phase]
	for kind, n := range counts {
		if !allowed[kind] {
			t.Errorf("round %d: after a kill in phase %s, %d letters are %s: %v", round, phase, n, kind, counts)
		}
	}
	return phase
}

// checkDiscarded checks a settled queue after round: no letter of it is
// left in the queue, each is recorded once, in a done batch, deleted or
// (moved) in kept with its bytes, with its body's hash; spool errors
// lists nothing; fsck is clean and counts total discards.
func checkDiscarded(t *testing.T, sp spoolAt, q, path, kept string, round int, ino map[string]uint64, moved bool, total int) {
	t.Helper()
	at := inodesAt(t, q, kept)
	rows := map[string]discardRow{}
	db := openLedgerRW(t, path)
	rs, err := db.Query(`SELECT d.file, COALESCE(d.content_hash, ''), COALESCE(d.outcome, ''), COALESCE(d.new_name, ''), b.state
FROM discards d JOIN discard_batches b ON b.id = d.batch_id WHERE b.note = ?`, fmt.Sprintf("round %d", round))
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var r discardRow
		if err := rs.Scan(&r.File, &r.Hash, &r.Outcome, &r.NewName, &r.State); err != nil {
			t.Fatal(err)
		}
		if _, dup := rows[r.File]; dup {
			t.Errorf("round %d: %s recorded twice", round, r.File)
		}
		rows[r.File] = r
	}
	rs.Close()
	db.Close()
	bad := 0
	for name, i := range ino {
		r, ok := rows[name]
		wantOutcome, wantPlaces := "deleted", 0
		if moved {
			wantOutcome, wantPlaces = "moved", 1
		}
		okPlace := len(at[i]) == wantPlaces && (!moved || at[i][0] == "kept/"+name)
		if !ok || r.State != "done" || r.Outcome != wantOutcome || r.Hash != sha("not json "+name) || !okPlace || (moved && r.NewName != name) {
			bad++
			if bad <= 5 {
				t.Errorf("round %d: %s: record %+v (found %v), at %q; want done, %s, its hash", round, name, r, ok, at[i], wantOutcome)
			}
			continue
		}
		if moved {
			data, err := os.ReadFile(filepath.Join(kept, name))
			if err != nil || string(data) != "not json "+name {
				t.Errorf("round %d: kept/%s = %q, %v", round, name, data, err)
			}
		}
	}
	if n := queryLedger(t, path, `SELECT COUNT(*) FROM spool_audit WHERE outcome = 'failed'`); n != 0 {
		t.Errorf("round %d: %d audit rows of failed actions", round, n)
	}
	if r := sp.mustRun(t, 0, "errors", q); r.stdout != "file,reason\n" {
		t.Errorf("round %d: spool errors lists %d lines after the discard", round, len(lines(r.stdout))-1)
	}
	requireFindings(t, fmt.Sprintf("round %d: fsck", round), sp.fsck(t, 0, q), map[string]int{"discarded": total})
}
