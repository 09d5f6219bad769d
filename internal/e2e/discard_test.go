//go:build linux

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// discardQueue makes a queue whose error/ holds two parse failures
// (p1.json, p2.json) and two messages with a msg_id and a missing field
// (m1.json, m2.json), and returns it with the bodies by name.
func discardQueue(t *testing.T) (string, map[string]string) {
	t.Helper()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	bodies := map[string]string{
		"p1.json": "not json 1", "p2.json": "not json 2",
		"m1.json": `{"msg_id":"m1"}`, "m2.json": `{"msg_id":"m2"}`,
	}
	for name, body := range bodies {
		putMessage(t, q, name, body)
	}
	requireStats(t, "consume", mustRun(t, 0, "consume", q), consumeStats{DeadLetters: 4})
	return q, bodies
}

func sha(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

// discardRow is a discards row joined with its batch, as the test reads it.
type discardRow struct {
	File, MsgID, Reason, Hash, Outcome, NewName, By, Note, State, ToDir string
	Size                                                                int64
}

func discardRows(t *testing.T, q string) map[string]discardRow {
	t.Helper()
	db := openLedgerRW(t, filepath.Join(q, "ledger.db"))
	defer db.Close()
	rows, err := db.Query(`SELECT d.file, COALESCE(d.msg_id, ''), d.reason, COALESCE(d.content_hash, ''), COALESCE(d.outcome, ''),
    COALESCE(d.new_name, ''), b.by_user, b.note, b.state, COALESCE(b.to_dir, ''), d.size
FROM discards d JOIN discard_batches b ON b.id = d.batch_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]discardRow{}
	for rows.Next() {
		var r discardRow
		if err := rows.Scan(&r.File, &r.MsgID, &r.Reason, &r.Hash, &r.Outcome, &r.NewName, &r.By, &r.Note, &r.State, &r.ToDir, &r.Size); err != nil {
			t.Fatal(err)
		}
		out[r.File] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDiscardSelections: each way of selecting (names, --reason, --all)
// removes exactly those dead letters from error/, prints a line each with
// the body's hash, and records each in the ledger with who, why, the
// reason, the msg_id when known and the hash; spool errors no longer
// lists them, fsck is clean and counts them as discarded, and spool show
// tells the story, by msg_id and by file name.
func TestDiscardSelections(t *testing.T) {
	t.Parallel()
	q, bodies := discardQueue(t)
	me := osActor(t)

	r := mustRun(t, 0, "discard", q, "p1.json", "--note", "garbage from the test")
	if want := "discarded p1.json (sha256 " + sha(bodies["p1.json"]) + ")\n"; r.stdout != want {
		t.Errorf("discard p1.json printed %q, want %q", r.stdout, want)
	}
	r = mustRun(t, 0, "discard", q, "--reason", "missing-field", "--note", "old contract", "--by", "alice")
	if got := lines(r.stdout); len(got) != 2 || !strings.HasPrefix(got[0], "discarded m1.json (sha256 ") || !strings.HasPrefix(got[1], "discarded m2.json (sha256 ") {
		t.Errorf("discard --reason missing-field printed %q", got)
	}
	if names := messageNames(t, q, errorStage); !reflect.DeepEqual(names, []string{"p2.json"}) {
		t.Errorf("error/ holds %q after two discards, want only p2.json", names)
	}
	mustRun(t, 0, "discard", q, "--all", "--note", "clean slate")
	if n := countNames(t, q, errorStage); n != 0 {
		t.Errorf("error/ holds %d entries after discard --all", n)
	}

	got := discardRows(t, q)
	want := map[string]discardRow{
		"p1.json": {File: "p1.json", Reason: "parse", Hash: sha(bodies["p1.json"]), Outcome: "deleted", By: me, Note: "garbage from the test", State: "done", Size: 10},
		"m1.json": {File: "m1.json", MsgID: "m1", Reason: "missing-field", Hash: sha(bodies["m1.json"]), Outcome: "deleted", By: "alice", Note: "old contract", State: "done", Size: 15},
		"m2.json": {File: "m2.json", MsgID: "m2", Reason: "missing-field", Hash: sha(bodies["m2.json"]), Outcome: "deleted", By: "alice", Note: "old contract", State: "done", Size: 15},
		"p2.json": {File: "p2.json", Reason: "parse", Hash: sha(bodies["p2.json"]), Outcome: "deleted", By: me, Note: "clean slate", State: "done", Size: 10},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("discard records:\n%+v\nwant\n%+v", got, want)
	}
	if r := mustRun(t, 0, "errors", q); r.stdout != "file,reason\n" {
		t.Errorf("spool errors after the discards:\n%s", r.stdout)
	}
	// One audit row a discard, written before and closed after, with who,
	// the selection and the counts.
	audit := discardAuditRows(t, q)
	wantAudit := []string{
		me + ` discard {"digest":"…","files":1,"names":["p1.json"],"note":"garbage from the test"} ok {"changed":0,"done":1,"missing":0,"selected":1}`,
		`alice discard {"digest":"…","files":2,"note":"old contract","os_user":"` + me + `","reason":"missing-field"} ok {"changed":0,"done":2,"missing":0,"selected":2}`,
		me + ` discard {"all":true,"digest":"…","files":1,"note":"clean slate"} ok {"changed":0,"done":1,"missing":0,"selected":1}`,
	}
	if !reflect.DeepEqual(audit, wantAudit) {
		t.Errorf("audit rows:\n%q\nwant\n%q", audit, wantAudit)
	}
	var st struct {
		Discarded   int `json:"discarded"`
		Interrupted int `json:"interrupted_discards"`
		Stages      map[string]int
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "status", q, "--json").stdout), &st); err != nil || st.Discarded != 4 || st.Interrupted != 0 || st.Stages["error"] != 0 {
		t.Errorf("status --json: %v, discarded %d, interrupted %d, error %d; want 4, 0, 0", err, st.Discarded, st.Interrupted, st.Stages["error"])
	}
	rep := fsck(t, 0, q)
	requireFindings(t, "fsck after discards", rep, map[string]int{"discarded": 4})
	if f, _ := rep.find("discarded"); !f.Info || !strings.Contains(f.Text, "in 3 discards") {
		t.Errorf("fsck's discarded finding: %+v, want informational, in 3 discards", f)
	}

	r = mustRun(t, 0, "show", q, "m1")
	if !strings.Contains(r.stdout, "discarded") || !strings.Contains(r.stdout, "by alice, deleted: old contract") ||
		!strings.Contains(r.stdout, sha(bodies["m1.json"])) || !strings.Contains(r.stdout, "missing-field") {
		t.Errorf("show m1 does not tell the discard:\n%s", r.stdout)
	}
	var js struct {
		MsgID    *string `json:"msg_id"`
		Discards []struct {
			File, Reason, By, Note, State string
			ContentHash                   string  `json:"content_hash"`
			Outcome                       *string `json:"outcome"`
		} `json:"discards"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "show", q, "p1.json", "--json").stdout), &js); err != nil {
		t.Fatal(err)
	}
	if len(js.Discards) != 1 || js.Discards[0].File != "p1.json" || js.Discards[0].By != me || js.Discards[0].Note != "garbage from the test" ||
		js.Discards[0].ContentHash != sha(bodies["p1.json"]) || js.Discards[0].State != "done" || js.Discards[0].Outcome == nil || *js.Discards[0].Outcome != "deleted" {
		t.Errorf("show p1.json --json discards = %+v", js.Discards)
	}
}

// discardAuditRows reads the audit rows of discards as "actor action selection outcome counts",
// oldest first, the digest of the set in the selection as …; every row
// must be closed.
func discardAuditRows(t *testing.T, q string) []string {
	t.Helper()
	db := openLedgerRW(t, filepath.Join(q, "ledger.db"))
	defer db.Close()
	rows, err := db.Query(`SELECT actor, action, selection, outcome, counts, COALESCE(ended_at, '') FROM spool_audit WHERE action = 'discard' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var actor, action, sel, outcome, counts, ended string
		if err := rows.Scan(&actor, &action, &sel, &outcome, &counts, &ended); err != nil {
			t.Fatal(err)
		}
		if ended == "" {
			t.Errorf("audit row %s %s %s has no ended_at", actor, action, sel)
		}
		sel = regexp.MustCompile(`"digest":"[0-9a-f]{64}"`).ReplaceAllString(sel, `"digest":"…"`)
		out = append(out, strings.Join([]string{actor, action, sel, outcome, counts}, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// messageNames lists the message names of a stage, sorted.
func messageNames(t *testing.T, q, stage string) []string {
	t.Helper()
	var out []string
	for _, f := range messages(t, q, stage) {
		out = append(out, f.Name)
	}
	return out
}

// TestDiscardDryRun: --dry-run prints what each selection would discard
// and changes nothing: not the queue, not the ledger's files, no record.
func TestDiscardDryRun(t *testing.T) {
	t.Parallel()
	q, bodies := discardQueue(t)
	out := t.TempDir()
	if err := os.Chmod(out, 0o700); err != nil { // closed to others, as --to must be
		t.Fatal(err)
	}
	before := treeSnapshot(t, q, out)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"m2.json", "p1.json"}, []string{"m2.json (reason missing-field", "p1.json (reason parse"}},
		{[]string{"--reason", "parse"}, []string{"p1.json (reason parse", "p2.json (reason parse"}},
		{[]string{"--all", "--to", out}, []string{"m1.json", "m2.json", "p1.json", "p2.json"}},
	} {
		r := mustRun(t, 0, append([]string{"discard", q, "--dry-run", "--note", "just looking"}, tc.args...)...)
		got := lines(r.stdout)
		if len(got) != len(tc.want) {
			t.Errorf("dry run %q printed %q, want %d lines", tc.args, got, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			name := strings.Fields(w)[0]
			if !strings.HasPrefix(got[i], "would discard "+w) || !strings.Contains(got[i], "sha256 "+sha(bodies[name])) {
				t.Errorf("dry run %q line %d = %q, want would discard %s with its hash", tc.args, i, got[i], w)
			}
		}
	}
	if d := diffSnapshots(before, treeSnapshot(t, q, out)); len(d) > 0 {
		t.Errorf("--dry-run changed the queue or the ledger: %q", d)
	}
	if n := queryLedger(t, filepath.Join(q, "ledger.db"), `SELECT (SELECT COUNT(*) FROM discards) + (SELECT COUNT(*) FROM discard_batches) + (SELECT COUNT(*) FROM spool_audit WHERE action = 'discard')`); n != 0 {
		t.Errorf("--dry-run recorded %d discard or audit rows", n)
	}
}

// TestDiscardTo: --to moves the dead letters out of the queue with their
// bytes, suffixing a name the directory already holds instead of
// replacing it; the record says where each went, and show tells it.
func TestDiscardTo(t *testing.T) {
	t.Parallel()
	q, bodies := discardQueue(t)
	kept := filepath.Join(filepath.Dir(q), "kept")
	if err := os.Mkdir(kept, 0o750); err != nil {
		t.Fatal(err)
	}
	writeFile(t, kept, "p1.json", "already here")
	inos := map[string]uint64{}
	for _, f := range messages(t, q, errorStage) {
		inos[f.Name] = f.Ino
	}
	r := mustRun(t, 0, "discard", q, "--reason", "parse", "--note", "keep for the vendor", "--to", kept)
	want := []string{
		"discarded p1.json -> " + kept + "/p1~2.json (sha256 " + sha(bodies["p1.json"]) + ")",
		"discarded p2.json -> " + kept + "/p2.json (sha256 " + sha(bodies["p2.json"]) + ")",
	}
	if got := lines(r.stdout); !reflect.DeepEqual(got, want) {
		t.Errorf("discard --to printed\n%q\nwant\n%q", got, want)
	}
	for name, body := range map[string]string{"p1.json": "already here", "p1~2.json": bodies["p1.json"], "p2.json": bodies["p2.json"]} {
		data, err := os.ReadFile(filepath.Join(kept, name))
		if err != nil || string(data) != body {
			t.Errorf("kept/%s = %q, %v; want %q", name, data, err, body)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(kept, "p2.json"), &st); err != nil || st.Ino != inos["p2.json"] {
		t.Errorf("kept/p2.json is inode %d (%v), want the dead letter's %d: moved, not copied", st.Ino, err, inos["p2.json"])
	}
	if names := messageNames(t, q, errorStage); !reflect.DeepEqual(names, []string{"m1.json", "m2.json"}) {
		t.Errorf("error/ holds %q, want m1.json and m2.json", names)
	}
	rows := discardRows(t, q)
	if r := rows["p1.json"]; r.Outcome != "moved" || r.NewName != "p1~2.json" || r.ToDir != kept || r.Hash != sha(bodies["p1.json"]) {
		t.Errorf("record of p1.json: %+v", r)
	}
	if r := mustRun(t, 0, "show", q, "p1.json"); !strings.Contains(r.stdout, "moved to "+kept+"/p1~2.json: keep for the vendor") {
		t.Errorf("show p1.json does not say where it went:\n%s", r.stdout)
	}
	requireFindings(t, "fsck after discard --to", fsck(t, 0, q), map[string]int{"discarded": 2})
}

// TestDiscardRefusals: a discard that cannot be right is refused before
// anything changes: no selection, several, no note, a path-like name
// (exit 2), a name not in error/ (exit 1), a --reason no dead letter has
// (exit 2, listing what error/ holds), a --to inside the queue however
// named, on another filesystem or missing (exit 2).
func TestDiscardRefusals(t *testing.T) {
	t.Parallel()
	q, _ := discardQueue(t)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(filepath.Join(q, done), link); err != nil {
		t.Fatal(err)
	}
	roots := []string{filepath.Join(q, inbox), filepath.Join(q, errorStage), filepath.Join(q, done)}
	before := treeSnapshot(t, roots...)
	cases := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"--note", "x"}, 2, []string{"missing FILE (or --reason R, or --all)"}},
		{[]string{"p1.json", "--all", "--note", "x"}, 2, []string{"not several"}},
		{[]string{"p1.json"}, 2, []string{"--note TEXT is required"}},
		{[]string{"p1.json", "--note", " "}, 2, []string{"--note TEXT is required"}},
		{[]string{"../q/error/p1.json", "--note", "x"}, 2, []string{"path-like name", "its name in error/, as spool errors lists it"}},
		{[]string{"p1.json", "nope.json", "--note", "x"}, 1, []string{"nope.json: not in error/"}},
		{[]string{"--reason", "nope", "--note", "x"}, 2, []string{`--reason "nope": no dead letter in error/ has it`, "in error/ now: missing-field, parse", "the reasons: parse,"}},
		{[]string{"--reason", "handler", "--note", "x"}, 2, []string{`--reason "handler"`, "in error/ now: missing-field, parse"}},
		{[]string{"--all", "--note", "x", "--to", filepath.Join(q, done)}, 2, []string{"is inside the queue"}},
		{[]string{"--all", "--note", "x", "--to", q}, 2, []string{"is inside the queue"}},
		{[]string{"--all", "--note", "x", "--to", link}, 2, []string{"is inside the queue"}},
		{[]string{"--all", "--note", "x", "--to", filepath.Join(q, "..", "none")}, 2, []string{"no such file or directory"}},
	}
	if other := otherFilesystem(t, q); other != "" {
		cases = append(cases, struct {
			args []string
			code int
			want []string
		}{[]string{"--all", "--note", "x", "--to", other}, 2, []string{"is on another filesystem than the queue", "would not be atomic"}})
	} else {
		t.Log("no writable directory on another filesystem: the cross-device case is not run")
	}
	for _, tc := range cases {
		r := run(t, append([]string{"discard", q}, tc.args...)...)
		if r.code != tc.code {
			t.Errorf("discard %q: want exit %d\n%s", tc.args, tc.code, r)
		}
		if ls := lines(r.stderr); len(ls) != 1 {
			t.Errorf("discard %q: want one line on stderr\n%s", tc.args, r)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("discard %q: stderr does not say %q\n%s", tc.args, w, r)
			}
		}
		if d := diffSnapshots(before, treeSnapshot(t, roots...)); len(d) > 0 {
			t.Errorf("discard %q changed the queue: %q", tc.args, d)
		}
		if n := queryLedger(t, filepath.Join(q, "ledger.db"), `SELECT (SELECT COUNT(*) FROM discards) + (SELECT COUNT(*) FROM discard_batches)`); n != 0 {
			t.Fatalf("discard %q recorded %d discard rows", tc.args, n)
		}
	}
	// The refusals made after the ledger was opened are audited as such,
	// and nothing else is.
	for _, a := range discardAuditRows(t, q) {
		if !strings.Contains(a, " refused ") {
			t.Errorf("audit row of a refusal: %q", a)
		}
	}
	if n := queryLedger(t, filepath.Join(q, "ledger.db"), `SELECT COUNT(*) FROM spool_audit WHERE action = 'discard' AND outcome = 'refused' AND detail LIKE '%no dead letter in error/ has it%'`); n != 2 {
		t.Errorf("%d audit rows of the --reason refusals, want 2", n)
	}
}

// otherFilesystem returns a writable directory on another filesystem than
// q's, or "" when there is none.
func otherFilesystem(t *testing.T, q string) string {
	t.Helper()
	var qs syscall.Stat_t
	if err := syscall.Stat(q, &qs); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{"/dev/shm", "/run", "/var/tmp", "/tmp"} {
		var st syscall.Stat_t
		if syscall.Stat(base, &st) != nil || st.Dev == qs.Dev {
			continue
		}
		dir, err := os.MkdirTemp(base, "spool-e2e-other-")
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return ""
}

// TestDiscardReadOnly: a user who may only read the queue and its ledger
// cannot discard: the refusal speaks of writing, and nothing changes; a
// dry run, which only reads, works for that user.
func TestDiscardReadOnly(t *testing.T) {
	as := asNobody(t)
	base, err := os.MkdirTemp("", "spool-e2e-discard-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(base, "q")
	mustRun(t, 0, "init", q)
	putMessage(t, q, "bad.json", "not json")
	mustRun(t, 0, "consume", q)
	before := treeSnapshot(t, q)
	r := as.run(t, "discard", q, "bad.json", "--note", "as nobody")
	if r.code != 2 || !strings.Contains(r.stderr, "may not write it") || !strings.Contains(r.stderr, "needs write access") || len(lines(r.stderr)) != 1 {
		t.Errorf("discard as nobody: want exit 2 and one line about writing\n%s", r)
	}
	if r := as.mustRun(t, 0, "discard", q, "bad.json", "--note", "as nobody", "--dry-run"); !strings.HasPrefix(r.stdout, "would discard bad.json") {
		t.Errorf("dry run as nobody:\n%s", r)
	}
	if d := diffSnapshots(before, treeSnapshot(t, q)); len(d) > 0 {
		t.Errorf("discard as nobody changed the queue: %q", d)
	}
	if names := messageNames(t, q, errorStage); fmt.Sprint(names) != "[bad.json]" {
		t.Errorf("error/ holds %q, want bad.json still", names)
	}
}
