package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// TestReplayCrash is the crash test of spool replay: over
// thousands of dead letters, spool replay --all is SIGKILLed at a random
// instant, drawn uniformly over the time an uninterrupted replay takes so
// that kills land in every phase, and then a completing run (fsck
// --repair, consume or replay, in turn) finishes what it left. After each
// round, every dead letter was either replayed exactly once in that round,
// with its history kept, or not at all, all of them alike; never both,
// never lost; and the ledger's replay records and spool errors --json
// agree with the rounds, file by file.
//
// The aimed rounds alternate between two instants the polling of error/
// sees: the first staging name (the intent committed, files being staged)
// and the first file released (all staged, files going back to inbox/),
// each followed by a random delay; so the pending and the staged phase,
// a few milliseconds each, are hit in a handful of rounds instead of by
// luck. Under -race it runs a plain build of spool (plainSpool): the
// instrumented one takes seconds a round, minutes in all. The quick run
// replays 200 letters through at least 4 kills, one round in two aimed;
// SPOOL_TEST_LONG=1 2000 through 28, one in three. Both go on until
// kills left a replay pending and staged.
func TestReplayCrash(t *testing.T) {
	t.Parallel()
	rng := newRand(t)
	letters := testenv.Pick(2000, 200)
	minBlindKills, minAimedKills := testenv.Pick(20, 2), testenv.Pick(8, 2)
	// One round in aimEvery aims at the moves: the quick run's few rounds
	// reach the pending and staged phases sooner.
	aimEvery := testenv.Pick(3, 2)
	// The aimed kills are drawn over the first tenth of the moves after
	// the instant they aim at: the moves' end is the intent's done commit,
	// the report and the exit, where most kills drawn over all of them
	// landed, so that it once took 20 rounds to leave one staged.
	const aimSpan = 10
	// A bound for a stalled machine: it takes 40 s alone, and was seen at
	// 4 min with other test suites running beside it.
	budget := 12 * time.Minute
	began := time.Now()

	sp := spoolAt{bin: plainSpool(t)}
	q := filepath.Join(t.TempDir(), "q")
	path := filepath.Join(q, "ledger.db")
	sp.mustRun(t, 0, "init", q)
	for i := range letters {
		putMessage(t, q, fmt.Sprintf("p%04d.json", i), "not json")
	}
	requireStats(t, "poison", sp.mustRun(t, 0, "consume", q), consumeStats{DeadLetters: letters})
	ino := map[string]uint64{} // name in error/ -> inode: stable, for names are never suffixed here
	for _, f := range messages(t, q, errorStage) {
		ino[f.Name] = f.Ino
	}
	if len(ino) != letters {
		t.Fatalf("error/ holds %d dead letters, want %d", len(ino), letters)
	}

	replayed := 0 // rounds in which every letter was replayed
	s := &replayState{t: t, sp: sp, q: q, path: path, ino: ino}

	// An uninterrupted replay, timed, in all and from its first move (the
	// first staging name in error/) to its exit: the blind kills are drawn
	// over the first, the kills after the first move over the second.
	measure := func() (total, moves time.Duration) {
		t0 := time.Now()
		p := sp.start(t, "replay", q, "--all")
		first, ok := waitForStaging(t, p, q)
		r := p.wait(t)
		total = time.Since(t0)
		if r.code != 0 || len(lines(r.stdout)) != letters {
			t.Fatalf("an uninterrupted replay: want exit 0 and %d lines, got exit %d and %d lines\n%s", letters, r.code, len(lines(r.stdout)), r.stderr)
		}
		if ok {
			moves = time.Since(first)
		}
		replayed++
		s.check("after an uninterrupted replay", replayed, true, false)
		s.checkTasks("after an uninterrupted replay", replayed, letters)
		requireStats(t, "consume after an uninterrupted replay", sp.mustRun(t, 0, "consume", q), consumeStats{DeadLetters: letters})
		s.check("consumed again", replayed, false, true)
		return total, max(moves, time.Millisecond)
	}
	span, moves := measure()
	t.Logf("an uninterrupted replay of %d dead letters takes %v, %v of it from the first move", letters, span, moves)

	phases := map[bool]map[string]int{true: {}, false: {}}
	var delays []time.Duration
	completers := []string{"fsck --repair", "consume", "replay --all"}
	blindKills, aimedKills := 0, 0
	for round := 0; ; round++ {
		hit := func(ph string) bool { return phases[true][ph]+phases[false][ph] > 0 }
		if blindKills >= minBlindKills && aimedKills >= minAimedKills && hit(phasePending) && hit(phaseStaged) {
			break
		}
		// The quick run's few kills may all miss one of the phases, a
		// few milliseconds each, on a loaded machine: the bound on rounds
		// leaves room for them (once 17 rounds fell short).
		if round > max(4*(minBlindKills+minAimedKills), 48) || time.Since(began) > budget {
			t.Fatalf("after %d rounds in %v, only %d blind and %d aimed kills hit a live replay, leaving phases %v and %v",
				round, time.Since(began).Round(time.Second), blindKills, aimedKills, phases[true], phases[false])
		}
		if round > 0 && round%6 == 0 {
			// History grows, and with it the time of the replay's report;
			// so may the machine's load. The latest measure is the one the
			// kills are drawn over, so that they keep landing in a live
			// replay.
			span, moves = measure()
		}
		// The rounds kill blind, at an instant drawn uniformly over a
		// whole replay, but one in aimEvery, which kills a random instant
		// after the first file staged or, the next time, after the first
		// file released: the moves are a small part of the whole.
		blind := round%aimEvery != aimEvery-1
		aim, ready := "the first staging", staging(".spool-replay-")
		if (round/aimEvery)%2 == 1 {
			aim, ready = "the first release", releasing(".spool-replay-", letters)
		}
		var delay time.Duration
		p := sp.start(t, "replay", q, "--all")
		alive := false
		if blind {
			delay = time.Duration(rng.Int64N(int64(span) + 1))
			alive = p.killAfter(t, delay)
		} else if _, ok := waitForErrorStage(t, p, q, aim, ready); ok {
			delay = time.Duration(rng.Int64N(int64(moves)/aimSpan + 1))
			alive = p.killAfter(t, delay)
		}
		phase := s.observe(alive)
		phases[blind][phase]++
		if !alive {
			if r := p.result(); r.code != 0 {
				t.Fatalf("round %d: replay exited by itself with a failure\n%s", round, r)
			}
		} else if blind {
			blindKills++
			delays = append(delays, delay)
		} else {
			aimedKills++
		}
		committed := phase != phaseNone

		completer := completers[round%len(completers)]
		switch completer {
		case "fsck --repair":
			r := sp.mustRun(t, 0, "fsck", q, "--repair")
			if committed && phase != phaseDone && !strings.Contains(r.stdout, "repaired replay ") {
				t.Errorf("round %d: fsck --repair does not say it finished the replay\n%s", round, r)
			}
		case "consume":
			sp.mustRun(t, 0, "consume", q)
		case "replay --all":
			sp.mustRun(t, 0, "replay", q, "--all")
			committed = true // it finishes the killed one, or replays them all itself
		}
		if committed {
			replayed++
		}
		inInbox := committed && completer != "consume"
		if !blind {
			aim = "aimed at " + aim
		} else {
			aim = "blind"
		}
		what := fmt.Sprintf("round %d (%s, killed %v after %v, phase %s, completed by %s)", round, aim, alive, delay, phase, completer)
		full := round%5 == 4
		s.check(what, replayed, inInbox, full && !inInbox)
		s.checkTasks(what, replayed, letters)
		if inInbox {
			requireStats(t, what+": consume", sp.mustRun(t, 0, "consume", q), consumeStats{DeadLetters: letters})
			s.check(what+": consumed again", replayed, false, full)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	slices.Sort(delays)
	t.Logf("%d blind kills (delays min %v, median %v, max %v, of a replay of %v) left phases %v; %d kills after the first move left phases %v; every letter replayed %d times in %v",
		blindKills, delays[0], delays[len(delays)/2], delays[len(delays)-1], span, phases[true],
		aimedKills, phases[false], replayed, time.Since(began).Round(time.Millisecond))
	for _, ph := range []string{phasePending, phaseStaged} {
		if phases[true][ph]+phases[false][ph] == 0 {
			t.Errorf("no kill left a replay %s (phases %v, %v): the test missed the moves", ph, phases[true], phases[false])
		}
	}
	if countNames(t, q, errorStage) == letters {
		s.check("at the end", replayed, false, true)
	}
	requireFindings(t, "fsck at the end", sp.fsck(t, 0, q), nil)
}

// checkTasks requires spool tasks to list one task per replay committed
// so far (replayed), every one done with all letters replayed
// (requireOneMoveTasks).
func (s *replayState) checkTasks(what string, replayed, letters int) {
	s.t.Helper()
	requireOneMoveTasks(s.t, s.sp, s.q, what, "replay", replayed, letters)
}

// The phases a kill of spool replay can leave a replay in.
const (
	phaseNone    = "before-intent" // no intent committed: nothing moved
	phasePending = "pending"       // the intent committed; files being staged in error/
	phaseStaged  = "staged"        // every file staged; files being released to inbox/
	phaseDone    = "done"          // the intent finished
)

// replayState checks the queue and the ledger of TestReplayCrash.
type replayState struct {
	t    *testing.T
	sp   spoolAt
	q    string
	path string
	ino  map[string]uint64
	// intents is the number of replay intents seen so far.
	intents int
}

// where maps each inode in the queue to the stage and name it is under;
// every entry of every stage is listed, messages or not.
func (s *replayState) where() map[uint64][]string {
	s.t.Helper()
	out := map[uint64][]string{}
	for _, stage := range []string{inbox, processing, done, errorStage} {
		des, err := os.ReadDir(filepath.Join(s.q, stage))
		if err != nil {
			s.t.Fatal(err)
		}
		for _, de := range des {
			fi, err := de.Info()
			if err != nil {
				s.t.Fatal(err)
			}
			if fi.IsDir() {
				continue // a consumer's session directory, empty between runs
			}
			i := fi.Sys().(*syscall.Stat_t).Ino
			out[i] = append(out[i], stage+"/"+de.Name())
		}
	}
	return out
}

// observe reads the state a killed (or finished) replay left: the phase
// of its intent, if it committed one, and that every letter is in exactly
// one place consistent with that phase.
func (s *replayState) observe(alive bool) string {
	t := s.t
	t.Helper()
	db := openLedgerRW(t, s.path)
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM replay_intents`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	phase := phaseNone
	var id int64
	switch {
	case n == s.intents:
	case n == s.intents+1:
		var state string
		if err := db.QueryRow(`SELECT id, state FROM replay_intents ORDER BY id DESC LIMIT 1`).Scan(&id, &state); err != nil {
			t.Fatal(err)
		}
		phase = map[string]string{"pending": phasePending, "staged": phaseStaged, "done": phaseDone}[state]
		if phase == "" {
			t.Fatalf("intent %d in state %q", id, state)
		}
		var items int
		if err := db.QueryRow(`SELECT COUNT(*) FROM replay_items WHERE intent_id = ?`, id).Scan(&items); err != nil {
			t.Fatal(err)
		}
		if items != len(s.ino) {
			t.Errorf("intent %d (%s) holds %d items, want all %d dead letters", id, state, items, len(s.ino))
		}
	default:
		t.Fatalf("one replay made %d intents", n-s.intents)
	}
	db.Close()
	s.intents = n
	if !alive && phase != phaseDone {
		t.Errorf("replay exited by itself with its intent %s", phase)
	}

	// Every letter is in exactly one place, and a place its phase allows.
	at := s.where()
	counts := map[string]int{}
	for name, i := range s.ino {
		places := at[i]
		if len(places) != 1 {
			t.Errorf("%s (inode %d) is in %d places after a kill in phase %s: %q", name, i, len(places), phase, places)
			continue
		}
		kind := ""
		switch p := places[0]; {
		case p == "error/"+name:
			kind = "error"
		case p == "inbox/"+name:
			kind = "inbox"
		case strings.HasPrefix(p, "error/.spool-replay-"):
			kind = "staged"
			if want := fmt.Sprintf("error/.spool-replay-%d-", id); !strings.HasPrefix(p, want) {
				t.Errorf("%s is staged as %s, not under its intent %d", name, p, id)
			}
		default:
			t.Errorf("%s is at %s after a kill in phase %s", name, p, phase)
		}
		counts[kind]++
	}
	allowed := map[string][]string{
		phaseNone:    {"error"},
		phasePending: {"error", "staged"},
		phaseStaged:  {"staged", "inbox"},
		phaseDone:    {"inbox"},
	}[phase]
	for kind, n := range counts {
		if !slices.Contains(allowed, kind) {
			t.Errorf("after a kill in phase %s, %d letters are %s: %v", phase, n, kind, counts)
		}
	}
	return phase
}

// errorJSON is what TestReplayCrash reads of spool errors --json.
type errorJSON struct {
	File             string `json:"file"`
	Ino              uint64 `json:"ino"`
	Replays          int    `json:"replays"`
	PreviousFailures int    `json:"previous_failures"`
	History          []struct {
		Event   string `json:"event"`
		File    string `json:"file"`
		NewName string `json:"new_name"`
	} `json:"history"`
}

// check checks a settled queue (no replay running, none unfinished):
// every letter is in inbox/ (inInbox) or in error/ under its name, each
// exactly once. In error/, also: every replay intent is done, with one
// record per letter; every letter has replayed replay records and
// replayed+1 dead-letter records, and spool errors --long tells the same
// counts (and, when full, spool errors --json the whole history: it costs
// seconds under -race, so not every round).
func (s *replayState) check(what string, replayed int, inInbox, full bool) {
	t := s.t
	t.Helper()
	at := s.where()
	stage := errorStage
	if inInbox {
		stage = inbox
	}
	lost, moved := 0, 0
	for name, i := range s.ino {
		places := at[i]
		switch {
		case len(places) == 0:
			lost++
			if lost <= 5 {
				t.Errorf("%s: %s is lost (inode %d in no stage)", what, name, i)
			}
		case len(places) > 1 || places[0] != stage+"/"+name:
			moved++
			if moved <= 5 {
				t.Errorf("%s: %s is at %q, want %s/%s", what, name, places, stage, name)
			}
		}
	}
	if len(at) != len(s.ino) {
		letter := map[uint64]bool{}
		for _, i := range s.ino {
			letter[i] = true
		}
		var extra []string
		for i, ps := range at {
			if !letter[i] {
				extra = append(extra, ps...)
			}
		}
		t.Errorf("%s: the stages hold %d entries besides the letters: %q", what, len(extra), head(extra, 10))
	}
	if inInbox {
		return // the records are checked once the letters are back in error/
	}

	db := openLedgerRW(t, s.path)
	defer db.Close()
	var intents, unfinished int
	if err := db.QueryRow(`SELECT COUNT(*), COUNT(*) FILTER (WHERE state <> 'done') FROM replay_intents`).Scan(&intents, &unfinished); err != nil {
		t.Fatal(err)
	}
	s.intents = intents
	if intents != replayed || unfinished != 0 {
		t.Errorf("%s: %d replay intents, %d unfinished; want %d, all done", what, intents, unfinished, replayed)
	}
	perIntent := map[int64]int{}
	rows, err := db.Query(`SELECT COALESCE(intent_id, 0), COUNT(*) FROM replays GROUP BY intent_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		perIntent[id] = n
	}
	rows.Close()
	for id, n := range perIntent {
		if n != len(s.ino) {
			t.Errorf("%s: intent %d has %d replay records, want one per letter, %d", what, id, n, len(s.ino))
		}
	}
	count := func(query string) map[uint64]int {
		m := map[uint64]int{}
		rows, err := db.Query(query)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var i int64
			var n int
			if err := rows.Scan(&i, &n); err != nil {
				t.Fatal(err)
			}
			m[uint64(i)] = n
		}
		return m
	}
	reps := count(`SELECT ino, COUNT(*) FROM replays GROUP BY ino`)
	dls := count(`SELECT ino, COUNT(*) FROM deliveries WHERE outcome = 'dead-letter' GROUP BY ino`)
	wantDL := replayed + 1
	bad := 0
	for name, i := range s.ino {
		if reps[i] != replayed || dls[i] != wantDL {
			bad++
			if bad <= 5 {
				t.Errorf("%s: %s has %d replay records and %d dead-letter records, want %d and %d", what, name, reps[i], dls[i], replayed, wantDL)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: ... %d letters in all with wrong records", what, bad)
	}
	db.Close()

	// spool errors --long: a line a letter, REPLAYS and PREVIOUS its 8th
	// and 9th columns (no name or time here holds a space).
	long := lines(s.sp.mustRun(t, 0, "errors", s.q, "--long").stdout)
	if len(long) != len(s.ino)+1 {
		t.Errorf("%s: spool errors --long has %d lines, want a header and %d", what, len(long), len(s.ino))
	}
	bad = 0
	for _, l := range long[min(1, len(long)):] {
		f := strings.Fields(l)
		if len(f) < 9 || s.ino[f[0]] == 0 || f[7] != fmt.Sprint(replayed) || f[8] != fmt.Sprint(replayed) {
			bad++
			if bad <= 5 {
				t.Errorf("%s: spool errors --long: %q, want REPLAYS and PREVIOUS %d", what, l, replayed)
			}
		}
	}
	if !full {
		return
	}
	var rowsJSON []errorJSON
	if err := json.Unmarshal([]byte(s.sp.mustRun(t, 0, "errors", s.q, "--json").stdout), &rowsJSON); err != nil {
		t.Fatal(err)
	}
	if len(rowsJSON) != len(s.ino) {
		t.Errorf("%s: spool errors --json lists %d dead letters, want %d", what, len(rowsJSON), len(s.ino))
	}
	bad = 0
	for _, r := range rowsJSON {
		ok := r.Ino == s.ino[r.File] && r.Replays == replayed && r.PreviousFailures == replayed && len(r.History) == 2*replayed
		for k, h := range r.History {
			want := map[int]string{0: "dead-letter", 1: "replay"}[k%2]
			ok = ok && h.Event == want && h.File == r.File && (h.Event != "replay" || h.NewName == r.File)
		}
		if !ok {
			bad++
			if bad <= 5 {
				t.Errorf("%s: spool errors --json: %s (inode %d): replays=%d previous_failures=%d, %d history events %+v; want %d, %d and %d alternating",
					what, r.File, r.Ino, r.Replays, r.PreviousFailures, len(r.History), r.History, replayed, replayed, 2*replayed)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: ... %d letters in all with a wrong history in spool errors --json", what, bad)
	}
}

// TestReplayResumeOnABusyQueue: a replay killed after it released most of
// its files, on a queue whose inbox/ holds a large backlog besides. The
// run that finishes it must find where each released file went in one
// pass over the stages, not one pass per file: that would be files ×
// backlog stat calls (here 1,000 × 20,000 with SPOOL_TEST_LONG=1, 1,000 ×
// 2,000 in the quick run, which shows the resume and leaves the bound to
// the long run), minutes on a queue of a million, from cron.
// The bound is relative, to a plain fsck of the same queue, which reads
// every stage once: a loaded machine slows both alike. Under -race it
// runs a plain build of spool (plainSpool), as TestReplayCrash does.
func TestReplayResumeOnABusyQueue(t *testing.T) {
	t.Parallel()
	const letters = 1000
	backlog := testenv.Pick(20000, 2000)
	sp := spoolAt{bin: plainSpool(t)}
	q := filepath.Join(t.TempDir(), "q")
	path := filepath.Join(q, "ledger.db")
	sp.mustRun(t, 0, "init", q)
	for i := range letters {
		putMessage(t, q, fmt.Sprintf("p%04d.json", i), "not json")
	}
	requireStats(t, "poison", sp.mustRun(t, 0, "consume", q), consumeStats{DeadLetters: letters})
	stmts := []string{`INSERT INTO replay_intents (id, by_user, created_at, state) VALUES (1, 'op', '` + time.Now().UTC().Format(ledgerTime) + `', 'staged')`}
	for i, f := range messages(t, q, errorStage) {
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO replay_items (intent_id, idx, file, ino) VALUES (1, %d, '%s', %d)`, i, f.Name, f.Ino))
		// All but the last were released to inbox/ before the kill.
		to := filepath.Join(q, inbox, f.Name)
		if i == letters-1 {
			to = filepath.Join(q, errorStage, fmt.Sprintf(".spool-replay-1-%d", i))
		}
		if err := os.Rename(filepath.Join(q, errorStage, f.Name), to); err != nil {
			t.Fatal(err)
		}
	}
	execLedger(t, path, stmts...)
	for i := range backlog {
		putMessage(t, q, fmt.Sprintf("w%05d.json", i), "not json")
	}
	t0 := time.Now()
	if r := sp.run(t, "fsck", q); r.code != 1 || !strings.Contains(r.stdout, "replay") {
		t.Fatalf("fsck does not name the interrupted replay:\n%s", r)
	}
	pass := time.Since(t0)
	t0 = time.Now()
	r := sp.mustRun(t, 0, "fsck", q, "--repair")
	took := time.Since(t0)
	t.Logf("fsck --repair finished a replay of %d files beside a backlog of %d in %v; a plain fsck took %v", letters, backlog, took, pass)
	if !strings.Contains(r.stdout, fmt.Sprintf("finished, %d of its %d files replayed", letters, letters)) {
		t.Errorf("fsck --repair did not finish the replay:\n%s", r)
	}
	if n := queryLedger(t, path, `SELECT COUNT(*) FROM replays WHERE intent_id = 1`); n != letters {
		t.Errorf("%d replay records, want %d", n, letters)
	}
	if limit := 20*pass + 2*time.Second; took > limit {
		t.Errorf("fsck --repair took %v to finish the replay, over 20 plain fscks (%v each) and 2 s: a pass over the stages per file?", took, pass)
	}
}

// TestReplayRefusalsRecordNothing: a replay refused (a name not in error/,
// a path-like name), asked with --dry-run, or skipping everything selected
// commits no intent: the ledger and the queue are as they were.
func TestReplayRefusalsRecordNothing(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	path := filepath.Join(q, "ledger.db")
	mustRun(t, 0, "init", q)
	putMessage(t, q, "a.json", "not json")
	putMessage(t, q, "b.json", `{"msg_id":"b-1"}`) // a missing field: it has a msg_id
	putMessage(t, q, "c.json", orderMessage("b-1", "o", 1, "1.00"))
	requireStats(t, "consume", mustRun(t, 0, "consume", q), consumeStats{Processed: 1, DeadLetters: 2})
	before := treeSnapshot(t, filepath.Join(q, inbox), filepath.Join(q, errorStage), filepath.Join(q, done))
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"a.json", "missing.json"}, 1},
		{[]string{"a.json", "../a.json"}, 2},
		{[]string{"--all", "--dry-run"}, 0},
		{[]string{"b.json"}, 0}, // skipped: msg_id b-1 already processed
	} {
		r := run(t, append([]string{"replay", q}, tc.args...)...)
		if r.code != tc.code {
			t.Errorf("replay %q: want exit %d\n%s", tc.args, tc.code, r)
		}
		if n := queryLedger(t, path, `SELECT (SELECT COUNT(*) FROM replay_intents) + (SELECT COUNT(*) FROM replays)`); n != 0 {
			t.Errorf("replay %q recorded %d intents and replays", tc.args, n)
		}
		if d := diffSnapshots(before, treeSnapshot(t, filepath.Join(q, inbox), filepath.Join(q, errorStage), filepath.Join(q, done))); len(d) > 0 {
			t.Errorf("replay %q changed the queue: %q", tc.args, d)
		}
	}
}
