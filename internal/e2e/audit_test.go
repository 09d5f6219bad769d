package e2e

import (
	"encoding/json"
	"fmt"
	"os/user"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// auditJSONRow is one object of spool audit --json.
type auditJSONRow struct {
	ID        int64            `json:"id"`
	At        string           `json:"at"`
	EndedAt   *string          `json:"ended_at"`
	DurationS *float64         `json:"duration_s"`
	Actor     string           `json:"actor"`
	Role      string           `json:"role"`
	Via       string           `json:"via"`
	Action    string           `json:"action"`
	Selection map[string]any   `json:"selection"`
	Counts    map[string]int64 `json:"counts"`
	Outcome   string           `json:"outcome"`
	Shown     string           `json:"shown"`
	Recorded  bool             `json:"recorded"`
	Detail    string           `json:"detail"`
	Host      string           `json:"host"`
	PID       int              `json:"pid"`
	Task      *int64           `json:"task"`
}

// auditRows runs spool audit --json on q and decodes it, checking that
// the array round-trips: decoded and encoded again, it decodes to the
// same rows.
func auditRows(t *testing.T, sp spoolAt, q string, args ...string) []auditJSONRow {
	t.Helper()
	r := sp.mustRun(t, 0, append([]string{"audit", q, "--json"}, args...)...)
	var rows []auditJSONRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("audit --json: %v\n%s", err, r.stdout)
	}
	again, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	var back []auditJSONRow
	if err := json.Unmarshal(again, &back); err != nil || !reflect.DeepEqual(back, rows) {
		t.Fatalf("audit --json does not round-trip: %v\n%s", err, r.stdout)
	}
	return rows
}

func osUserName(t *testing.T) string {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

// osActor is the OS user running the tests as the ledger records them,
// with their realm: os:NAME.
func osActor(t *testing.T) string { return "os:" + osUserName(t) }

// TestAuditActions: each operator action leaves one row with who, what,
// its counts and how it ended, oldest first, in --json and in the table
// (a producer's escape sequence escaped there, exact in --json); a dry
// run leaves none, a refused replay one closed refused row; a replay's
// row names its task; --since selects by time and a bad
// value is exit 2.
func TestAuditActions(t *testing.T) {
	t.Parallel()
	sp := spoolAt{bin: spoolBin}
	q := filepath.Join(t.TempDir(), "q")
	sp.mustRun(t, 0, "init", q)
	evil := "\x1b]0;pwned\a.json"
	putMessage(t, q, "a.json", `{"msg_id":"a","order_no":"o","seq":1,"amount":"1"}`)
	putMessage(t, q, "p1.json", `not json`)
	putMessage(t, q, evil, `not json either`)
	requireStats(t, "first consume", sp.mustRun(t, 0, "consume", q), consumeStats{Processed: 1, DeadLetters: 2})
	sp.mustRun(t, 0, "replay", q, "--all", "--dry-run")
	sp.mustRun(t, 1, "replay", q, "nosuch.json")
	sp.mustRun(t, 0, "replay", q, "p1.json", evil, "--by", "alice", "--note", "fixed upstream")
	sp.mustRun(t, 1, "flush", q, "zz")
	sp.mustRun(t, 0, "prune", q, "--older-than", "30d")
	sp.mustRun(t, 0, "prune", q, "--older-than", "30d", "--dry-run")
	sp.mustRun(t, 0, "fsck", q, "--repair")

	me := osActor(t)
	rows := auditRows(t, sp, q)
	var got []string
	for _, r := range rows {
		got = append(got, r.Action)
	}
	if want := []string{"bind", "replay", "replay", "flush", "prune", "repair"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("audit actions %q, want %q\n%+v", got, want, rows)
	}
	// The refused replay is one closed row, refused, with why.
	if rf := rows[1]; rf.Outcome != "refused" || rf.Actor != me || rf.Detail != "nosuch.json: not in error/" || rf.Task != nil ||
		!reflect.DeepEqual(rf.Selection["names"], []any{"nosuch.json"}) {
		t.Errorf("refused replay row: %+v", rf)
	}
	rows = append(rows[:1:1], rows[2:]...)
	for i, r := range rows {
		if i > 0 && r.ID <= rows[i-1].ID {
			t.Errorf("rows not oldest first: id %d after %d", r.ID, rows[i-1].ID)
		}
		// A replay is a task: its row names it.
		if r.Outcome != "ok" || r.Shown != "ok" || !r.Recorded || r.Via != "cli" || r.Role != "" || r.EndedAt == nil ||
			r.DurationS == nil || *r.DurationS < 0 || r.PID <= 0 || r.Host == "" || (r.Task != nil) != (r.Action == "replay") {
			t.Errorf("row %d (%s): want a recorded ok from the command line, got %+v", i, r.Action, r)
		}
		if want := me; r.Action != "replay" && r.Actor != want {
			t.Errorf("row %d (%s): actor %q, want the OS user %q", i, r.Action, r.Actor, want)
		}
	}
	rp := rows[1]
	if rp.Actor != "alice" || rp.Selection["os_user"] != me || rp.Selection["note"] != "fixed upstream" ||
		!reflect.DeepEqual(rp.Selection["names"], []any{"p1.json", evil}) || rp.Selection["files"] != float64(2) ||
		len(rp.Selection["digest"].(string)) != 64 {
		t.Errorf("replay row: actor %q, selection %v", rp.Actor, rp.Selection)
	}
	if want := map[string]int64{"selected": 2, "done": 2, "skipped": 0, "missing": 0, "changed": 0}; !reflect.DeepEqual(rp.Counts, want) {
		t.Errorf("replay counts %v, want %v", rp.Counts, want)
	}
	if fl := rows[2]; !reflect.DeepEqual(fl.Selection["msg_ids"], []any{"zz"}) ||
		!reflect.DeepEqual(fl.Counts, map[string]int64{"selected": 1, "done": 0, "missing": 1}) {
		t.Errorf("flush row: %+v", fl)
	}
	if pr := rows[3]; pr.Selection["older_than"] != "30d" || !reflect.DeepEqual(pr.Counts, map[string]int64{"processed": 0, "deliveries": 0, "files": 0, "bytes": 0, "kept": 0}) {
		t.Errorf("prune row: %+v", pr)
	}
	if rep := rows[4]; rep.Counts["problems"] != 0 || rep.Counts["repairs"] != 0 || len(rep.Counts) != 2 {
		t.Errorf("repair row: %+v", rep)
	}
	if rows[0].Selection["queue_id"] == nil || rows[0].Selection["queue_id"] == "" {
		t.Errorf("bind row without the queue's identity: %+v", rows[0])
	}

	table := sp.mustRun(t, 0, "audit", q)
	if strings.ContainsAny(table.stdout, "\x1b\a") {
		t.Errorf("the table prints a producer's escape sequence raw:\n%q", table.stdout)
	}
	tl := lines(table.stdout)
	if len(tl) != 2+len(rows) || !strings.HasPrefix(tl[0], "ID") || !strings.Contains(tl[3], "alice") ||
		!strings.Contains(tl[3], `\u001b]0;pwned\u0007.json`) || !strings.Contains(tl[3], "done=2 missing=0 selected=2 skipped=0") {
		t.Errorf("audit table:\n%s", table.stdout)
	}

	if n := len(auditRows(t, sp, q, "--since", "1h")); n != len(rows)+1 {
		t.Errorf("--since 1h: %d rows, want %d", n, len(rows))
	}
	if n := len(auditRows(t, sp, q, "--since", rows[3].At)); n != 2 {
		t.Errorf("--since %s (the prune's start): %d rows, want 2", rows[3].At, n)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if r := sp.mustRun(t, 0, "audit", q, "--json", "--since", future); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("--since the future: %q, want []", r.stdout)
	}
	for _, bad := range []string{"bogus", "-1h", "0s", "2026-13-01T00:00:00Z", ""} {
		r := sp.run(t, "audit", q, "--since", bad)
		if r.code != 2 || !strings.Contains(r.stderr, "spool: audit: --since") || len(lines(r.stderr)) != 1 {
			t.Errorf("--since %q: want exit 2 and one line, got\n%s", bad, r)
		}
	}
}

// TestAuditKilledReplay: a replay SIGKILLed during its moves leaves its
// row started, which spool audit shows as interrupted (its process is
// gone); the next replay, which finishes it, closes that row as
// interrupted and records its own finishing, with its counts.
func TestAuditKilledReplay(t *testing.T) {
	t.Parallel()
	sp := spoolAt{bin: plainSpool(t)}
	q := filepath.Join(t.TempDir(), "q")
	sp.mustRun(t, 0, "init", q)
	const letters = 400
	for i := range letters {
		putMessage(t, q, fmt.Sprintf("p%04d.json", i), "not json")
	}
	requireStats(t, "poison", sp.mustRun(t, 0, "consume", q), consumeStats{DeadLetters: letters})
	p := sp.start(t, "replay", q, "--all")
	if _, ok := waitForStaging(t, p, q); !ok {
		t.Fatalf("the replay ended before its first move:\n%s", p.result())
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	if !p.killed {
		t.Fatalf("the replay of %d files ended before the kill:\n%s", letters, p.result())
	}
	rows := auditRows(t, sp, q)
	last := rows[len(rows)-1]
	if last.Action != "replay" || last.Outcome != "started" || last.Shown != "interrupted" || last.Recorded ||
		last.EndedAt != nil || last.DurationS != nil || last.PID != p.cmd.Process.Pid || last.Selection["all"] != true {
		t.Fatalf("killed replay's row: %+v", last)
	}
	table := sp.mustRun(t, 0, "audit", q)
	if !strings.Contains(table.stdout, "interrupted (no outcome: process gone)") {
		t.Errorf("the table does not show the killed replay as interrupted:\n%s", table.stdout)
	}

	r := sp.run(t, "replay", q, "--all")
	if r.code != 0 || !strings.Contains(r.stderr, "finished replay") {
		t.Fatalf("the next replay: want exit 0 finishing the killed one, got\n%s", r)
	}
	rows = auditRows(t, sp, q)
	if len(rows) < 2 {
		t.Fatalf("audit: %+v", rows)
	}
	killed, resume := rows[len(rows)-2], rows[len(rows)-1]
	if killed.ID != last.ID || killed.Outcome != "interrupted" || !killed.Recorded ||
		!strings.Contains(killed.Detail, fmt.Sprintf("process %d", last.PID)) || !strings.Contains(killed.Detail, "found by replay") {
		t.Errorf("the killed replay's row after the next run: %+v", killed)
	}
	if resume.Action != "replay" || resume.Outcome != "ok" || resume.Selection["resume"] == nil ||
		!reflect.DeepEqual(resume.Counts, map[string]int64{"intents": 1, "selected": letters, "done": letters}) {
		t.Errorf("the finishing's row: %+v", resume)
	}
	if n := countNames(t, q, inbox); n != letters {
		t.Errorf("inbox/ holds %d files after the finish, want %d", n, letters)
	}
}
