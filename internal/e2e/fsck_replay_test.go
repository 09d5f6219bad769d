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
)

// fsck and replays: an interrupted replay is finished by --repair, a live
// one is left alone.

// TestFsckInterruptedReplay: replays killed at each step, the state built
// by hand as a killed run leaves it (the crash test kills real runs). A
// pending intent with one file staged, one still under its name and one
// removed by hand; a staged intent with one file already in inbox/ and
// two still staged. fsck names both; --repair finishes them forward:
// every file that still exists reaches inbox/ with one replay record.
func TestFsckInterruptedReplay(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	path := filepath.Join(q, "ledger.db")
	mustRun(t, 0, "init", q)
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		putMessage(t, q, n+".json", "not json")
	}
	requireStats(t, "poison", mustRun(t, 0, "consume", q), consumeStats{DeadLetters: 6})
	ino := map[string]uint64{}
	for _, f := range messages(t, q, errorStage) {
		ino[f.Name] = f.Ino
	}
	now := time.Now().UTC().Format(ledgerTime)
	item := func(id, idx int, name string) string {
		return fmt.Sprintf(`INSERT INTO replay_items (intent_id, idx, file, ino) VALUES (%d, %d, '%s', %d)`, id, idx, name, ino[name])
	}
	execLedger(t, path,
		`INSERT INTO replay_intents (id, by_user, note, created_at, state) VALUES (1, 'op', 'pending one', '`+now+`', 'pending')`,
		item(1, 0, "a.json"), item(1, 1, "b.json"), item(1, 2, "c.json"),
		`INSERT INTO replay_intents (id, by_user, note, created_at, state) VALUES (2, 'op', 'staged one', '`+now+`', 'staged')`,
		item(2, 0, "d.json"), item(2, 1, "e.json"), item(2, 2, "f.json"),
	)
	mv := func(from, to string) {
		t.Helper()
		if err := os.Rename(filepath.Join(q, from), filepath.Join(q, to)); err != nil {
			t.Fatal(err)
		}
	}
	mv("error/a.json", "error/.spool-replay-1-0")
	if err := os.Remove(filepath.Join(q, errorStage, "c.json")); err != nil {
		t.Fatal(err)
	}
	mv("error/d.json", "inbox/d.json")
	mv("error/e.json", "error/.spool-replay-2-1")
	mv("error/f.json", "error/.spool-replay-2-2")

	rep := fsck(t, 1, q)
	requireFindings(t, "fsck of two interrupted replays", rep, map[string]int{"interrupted-replay": 2})
	out := repairThenClean(t, q, nil)
	for _, want := range []string{
		"repaired replay 1 by op: finished, 2 of its 3 files replayed",
		"repaired replay 2 by op: finished, 3 of its 3 files replayed",
	} {
		if !slices.Contains(out, want) {
			t.Errorf("--repair does not say %q:\n%s", want, strings.Join(out, "\n"))
		}
	}
	if got, want := names(t, q, inbox), []string{"a.json", "b.json", "d.json", "e.json", "f.json"}; !slices.Equal(got, want) {
		t.Errorf("inbox/ holds %q after the repair, want %q", got, want)
	}
	if got := names(t, q, errorStage); len(got) != 0 {
		t.Errorf("error/ still holds %q", got)
	}
	for n, i := range ino {
		want := 1
		if n == "c.json" {
			want = 0
		}
		if got := queryLedger(t, path, `SELECT COUNT(*) FROM replays WHERE ino = ? AND file = ?`, int64(i), n); got != want {
			t.Errorf("%s has %d replay records, want %d", n, got, want)
		}
	}
	if n := queryLedger(t, path, `SELECT COUNT(*) FROM replay_intents WHERE state = 'done' AND finished_at IS NOT NULL`); n != 2 {
		t.Errorf("%d intents are done, want 2", n)
	}
	// Consumed again, each failed twice and was replayed once between.
	requireStats(t, "consume of the replayed files", mustRun(t, 0, "consume", q), consumeStats{DeadLetters: 5})
	var rows []struct {
		File             string `json:"file"`
		Replays          int    `json:"replays"`
		PreviousFailures int    `json:"previous_failures"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "errors", q, "--json").stdout), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 {
		t.Errorf("errors --json lists %d dead letters, want 5", len(rows))
	}
	for _, r := range rows {
		if r.Replays != 1 || r.PreviousFailures != 1 {
			t.Errorf("%s: replays=%d previous_failures=%d, want 1 and 1", r.File, r.Replays, r.PreviousFailures)
		}
	}
}

// TestFsckLiveReplay: a replay still running, its intent unfinished and
// its lock held, is not an interrupted one: fsck, from cron beside an
// operator's replay, must not report it. Once its lock is free, it is.
func TestFsckLiveReplay(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	putMessage(t, q, "a.json", "not json")
	mustRun(t, 0, "consume", q)
	ino := statFile(t, filepath.Join(q, errorStage, "a.json")).Ino
	execLedger(t, filepath.Join(q, "ledger.db"),
		`INSERT INTO replay_intents (id, by_user, created_at, state) VALUES (1, 'op', '`+time.Now().UTC().Format(ledgerTime)+`', 'pending')`,
		fmt.Sprintf(`INSERT INTO replay_items (intent_id, idx, file, ino) VALUES (1, 0, 'a.json', %d)`, ino))
	// The replay lock is an flock on error/ itself (queue.Dir.LockReplays).
	lock, err := os.Open(filepath.Join(q, errorStage))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	requireFindings(t, "fsck beside a running replay", fsck(t, 0, q), nil)
	lock.Close()
	requireFindings(t, "fsck once the replay's lock is free", fsck(t, 1, q), map[string]int{"interrupted-replay": 1})
	repairThenClean(t, q, nil)
}
