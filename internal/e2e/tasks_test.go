package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
)

// asker is the second OS user of the approval test, created when missing.
const asker = "spool-e2e-asker"

// osUserAs runs spool as another OS user, in a directory that user may use.
type osUserAs struct {
	name     string
	uid, gid uint32
	bin, dir string
	// env is added to the environment; via, when set, runs spool through
	// it (sudo -n).
	env, via []string
}

// with is as with env added to its environment.
func (as *osUserAs) with(env ...string) *osUserAs {
	c := *as
	c.env = append(slices.Clone(as.env), env...)
	return &c
}

// secondUser creates (if missing) the OS user asker and prepares to run
// spool as it; it skips where this process is not root (fails on CI).
func secondUser(t *testing.T) *osUserAs {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root, to create a second OS user ("+asker+") and run spool as it")
	}
	u, err := user.Lookup(asker)
	if err != nil {
		out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", asker).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "already exists") {
			testenv.Missing(t, fmt.Sprintf("useradd %s: %v: %s", asker, err, out))
		}
		if u, err = user.Lookup(asker); err != nil {
			t.Fatalf("lookup %s after useradd: %v", asker, err)
		}
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return prepareAs(t, asker, uint32(uid), uint32(gid))
}

// prepareAs prepares to run spool as uid and gid (named name in the
// tests' messages): a copy of the binary it may run, and a directory of
// its own.
func prepareAs(t *testing.T, name string, uid, gid uint32) *osUserAs {
	t.Helper()
	base, err := os.MkdirTemp("", "spool-e2e-asker-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	as := &osUserAs{name: name, uid: uid, gid: gid, bin: filepath.Join(base, "spool"), dir: filepath.Join(base, "work")}
	if err := copyFile(spoolBin, as.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(as.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	as.chown(t, as.dir)
	return as
}

// chown gives path and everything below it to the user.
func (as *osUserAs) chown(t *testing.T, path string) {
	t.Helper()
	err := filepath.Walk(path, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(as.uid), int(as.gid))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// run runs spool as the user and returns what it did.
func (as *osUserAs) run(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	argv := append(append(slices.Clone(as.via), as.bin), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: as.uid, Gid: as.gid}}
	if as.env != nil {
		cmd.Env = append(os.Environ(), as.env...)
	}
	cmd.Dir = as.dir
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{args: args, stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("spool %q as %s: %v", args, as.name, err)
	}
	return r
}

// auditJSON is a row of spool audit --json, as the tests compare it.
type auditJSON struct {
	Actor, Role, Via, Action, Outcome, Detail string
	Task                                      *int64
	Counts                                    map[string]int64
	Selection                                 json.RawMessage
}

func taskAuditRows(t *testing.T, q string) []auditJSON {
	t.Helper()
	var rows []auditJSON
	if err := json.Unmarshal([]byte(mustRun(t, 0, "audit", q, "--json").stdout), &rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

// taskJSON is a task of spool tasks --json.
type taskJSON struct {
	ID                         int64
	Kind, State, Digest        string
	By                         string
	ByOS                       string `json:"by_os"`
	ApprovedBy                 string `json:"approved_by"`
	Files, Next, Done, Missing int
	Changed                    int
}

func tasksOf(t *testing.T, q string) []taskJSON {
	t.Helper()
	var ts []taskJSON
	if err := json.Unmarshal([]byte(mustRun(t, 0, "tasks", q, "--json").stdout), &ts); err != nil {
		t.Fatal(err)
	}
	return ts
}

// requireOneMoveTasks requires spool tasks to list n tasks of kind, each
// a replay or discard run at once of all files: done, every file begun
// and moved. A killed run's task is ended by the run that finished its
// move, whichever it was.
func requireOneMoveTasks(t *testing.T, sp spoolAt, q, what, kind string, n, files int) {
	t.Helper()
	var ts []taskJSON
	if err := json.Unmarshal([]byte(sp.mustRun(t, 0, "tasks", q, "--json").stdout), &ts); err != nil {
		t.Fatalf("%s: spool tasks --json: %v", what, err)
	}
	if len(ts) != n {
		t.Errorf("%s: spool tasks lists %d tasks, want one per %s committed: %d", what, len(ts), kind, n)
	}
	for _, tk := range ts {
		if tk.Kind != kind || tk.State != "done" || tk.Files != files || tk.Next != files || tk.Done != files || tk.Missing != 0 {
			t.Errorf("%s: task %+v, want a %s done with its %d files", what, tk, kind, files)
		}
	}
}

// TestTaskApprovalTwoUsers: under an approval policy, a replay over its
// limit asked by one OS user moves nothing and waits; that user's own
// approval is refused (exit 1, one line, nothing changed), so is --by
// naming someone else (exit 2); another OS user's approval runs it; and
// each step is an audit row, exactly.
func TestTaskApprovalTwoUsers(t *testing.T) {
	t.Parallel()
	as := secondUser(t)
	q := filepath.Join(as.dir, "q")
	mustRun(t, 0, "init", q)
	for i := range 4 {
		putMessage(t, q, fmt.Sprintf("p%d.json", i), "not json")
	}
	if err := os.WriteFile(filepath.Join(q, "spool.conf"), []byte(`{"approval": {"replay_over": 2, "discard_over": 0}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	requireStats(t, "poison", mustRun(t, 0, "consume", q), consumeStats{DeadLetters: 4})
	as.chown(t, q)
	before := len(taskAuditRows(t, q))
	root := "root"
	if u, err := user.Current(); err == nil {
		root = u.Username
	}

	r := as.run(t, "replay", q, "--all", "--note", "parser fixed")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "task 1: replay of 4 files waits for approval (sha256 ") ||
		!strings.HasSuffix(r.stdout, "): spool approve "+q+" 1\n") {
		t.Fatalf("request:\n%s", r)
	}
	if n := countNames(t, q, errorStage); n != 4 {
		t.Fatalf("error/ holds %d after the request, want 4: it moves nothing", n)
	}
	r = as.run(t, "approve", q, "1")
	if want := "spool: approve: task 1 was asked by os:" + asker + ": a request needs someone else's approval\n"; r.code != 1 || r.stderr != want || r.stdout != "" {
		t.Fatalf("own approval: want exit 1 and %q\n%s", want, r)
	}
	r = as.run(t, "replay", q, "--all", "--by", root)
	if r.code != 2 || !strings.Contains(r.stderr, "--by "+root+": under the approval policy") {
		t.Fatalf("--by another under a policy: want exit 2\n%s", r)
	}
	if ts := tasksOf(t, q); len(ts) != 1 || ts[0].State != "waiting" || ts[0].Files != 4 || ts[0].By != "os:"+asker || ts[0].ByOS != asker {
		t.Fatalf("tasks after the refusals: %+v", ts)
	}
	r = mustRun(t, 0, "approve", q, "1", "--yes")
	if !strings.Contains(r.stdout, "\ntask 1 approved: replay of 4 files asked by os:"+asker+"\n") ||
		!strings.HasSuffix(r.stdout, "task 1 done: 4 of 4 files replayed, 0 gone before, 0 changed since the request\n") {
		t.Fatalf("approval:\n%s", r)
	}
	if in, er := countNames(t, q, inbox), countNames(t, q, errorStage); in != 4 || er != 0 {
		t.Fatalf("after the approval inbox/ %d, error/ %d; want 4, 0", in, er)
	}
	if ts := tasksOf(t, q); ts[0].State != "done" || ts[0].ApprovedBy != "os:"+root || ts[0].Done != 4 {
		t.Fatalf("task after its run: %+v", ts[0])
	}

	rows := taskAuditRows(t, q)[before:]
	var got []string
	for _, row := range rows {
		task := "-"
		if row.Task != nil {
			task = strconv.FormatInt(*row.Task, 10)
		}
		got = append(got, fmt.Sprintf("%s|%s|%s|%s|%s|%s|%v|%s", row.Actor, row.Role, row.Via, row.Action, task, row.Outcome, row.Counts, row.Detail))
	}
	a, b := "os:"+asker, "os:"+root
	want := []string{
		a + "||cli|policy|-|ok|map[]|adopted the approval section of " + filepath.Join(q, "spool.conf") + ": replay_over=2 discard_over=0",
		a + "||cli|replay|1|ok|map[selected:4 skipped:0]|task 1 waits for approval: 4 files, over replay_over 2",
		a + "||cli|approve|1|refused|map[]|task 1 was asked by " + a + ": a request needs someone else's approval",
		a + "||cli|replay|-|refused|map[]|by " + root + ": under the approval policy the requester is the OS user who asks (" + a + "), not another name",
		b + "||cli|approve|1|ok|map[selected:4]|task 1 approved, asked by " + a,
		b + "||cli|run|1|ok|map[changed:0 done:4 missing:0 selected:4]|task 1 done: 4 of 4 files begun",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("audit rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var sel map[string]any
	if err := json.Unmarshal(rows[1].Selection, &sel); err != nil || sel["all"] != true || sel["note"] != "parser fixed" || sel["files"] != 4.0 {
		t.Errorf("the request's selection: %s", rows[0].Selection)
	}
}

// inodesIn maps the inode of every entry of stage (hidden staging names
// too) to its name.
func inodesIn(t *testing.T, q, stage string) map[uint64]string {
	t.Helper()
	out := map[uint64]string{}
	for _, f := range entries(t, q, stage) {
		out[f.Ino] = f.Name
	}
	return out
}

// requireEachOnce fails unless each inode of want is in exactly one of
// error/ and inbox/, and no other file is in either: nothing lost, nothing
// doubled. It returns how many are in inbox/.
func requireEachOnce(t *testing.T, q string, want map[uint64]bool, when string) int {
	t.Helper()
	in, er := inodesIn(t, q, inbox), inodesIn(t, q, errorStage)
	for ino := range want {
		_, a := in[ino]
		_, b := er[ino]
		if a == b {
			t.Fatalf("%s: inode %d in inbox/ %v and in error/ %v: want exactly one", when, ino, a, b)
		}
	}
	if len(in)+len(er) != len(want) {
		t.Fatalf("%s: inbox/ %d and error/ %d entries, want %d in all", when, len(in), len(er), len(want))
	}
	return len(in)
}

// killedTask reads the id and state of the queue's task (0 and "" for
// none) from its SQLite ledger directly, read-write: a writer killed as
// it created the ledger's -wal can leave no -shm beside it, which a
// reader (spool tasks) refuses until a writer runs again.
func killedTask(t *testing.T, q string) (int64, string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(q, "ledger.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var (
		id    int64
		state string
	)
	switch err := db.QueryRow(`SELECT id, state FROM spool_tasks ORDER BY id DESC LIMIT 1`).Scan(&id, &state); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, ""
	case err != nil:
		t.Fatal(err)
	}
	return id, state
}

// TestTaskKillResume: a replay task killed by SIGKILL at random instants,
// then resumed (and killed again), in the end moves each selected file
// exactly once: every one in inbox/ once, one replay record each, the
// task done with all its files.
func TestTaskKillResume(t *testing.T) {
	t.Parallel()
	rng := newRand(t)
	letters, kills := testenv.Pick(1500, 150), testenv.Pick(30, 8)
	sp := spoolAt{bin: plainSpool(t)}
	q := filepath.Join(t.TempDir(), "q")
	sp.mustRun(t, 0, "init", q)
	for i := range letters {
		putMessage(t, q, fmt.Sprintf("p%04d.json", i), "not json")
	}
	requireStats(t, "poison", sp.mustRun(t, 0, "consume", q), consumeStats{DeadLetters: letters})
	want := map[uint64]bool{}
	for ino := range inodesIn(t, q, errorStage) {
		want[ino] = true
	}
	// A chunk of 50 every 0.1 s: the run lasts about letters/500 s, and
	// the kills are drawn over it.
	span := time.Duration(letters) * 2 * time.Millisecond
	id := int64(0)
	landed := 0
	for k := 0; k < kills; k++ {
		var p *proc
		if id == 0 {
			p = sp.start(t, "replay", q, "--all", "--rate", "500", "--note", "crash")
		} else {
			p = sp.start(t, "resume", q, strconv.FormatInt(id, 10))
		}
		if p.killAfter(t, time.Duration(rng.Int64N(int64(span)))) {
			landed++
		} else if r := p.result(); r.code != 0 {
			t.Fatalf("round %d exited by itself:\n%s", k, r)
		}
		requireEachOnce(t, q, want, fmt.Sprintf("after kill %d", k))
		tid, state := killedTask(t, q)
		if tid != 0 {
			id = tid
			if state == "done" {
				break // a round finished it: the kills left land on nothing
			}
		}
	}
	switch _, state := killedTask(t, q); {
	case id == 0:
		mustRun(t, 0, "replay", q, "--all", "--rate", "500")
	case state != "done":
		mustRun(t, 0, "resume", q, strconv.FormatInt(id, 10))
	}
	if moved := requireEachOnce(t, q, want, "at the end"); moved != letters {
		t.Fatalf("inbox/ holds %d, want all %d", moved, letters)
	}
	ts := tasksOf(t, q)
	if len(ts) != 1 || ts[0].State != "done" || ts[0].Done != letters || ts[0].Next != letters || ts[0].Missing != 0 || ts[0].Changed != 0 {
		t.Fatalf("task: %+v, want done with %d files", ts, letters)
	}
	var recs []struct {
		File string
		Ino  uint64
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "replays", q, "--json").stdout), &recs); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]int{}
	for _, r := range recs {
		seen[r.Ino]++
	}
	for ino := range want {
		if seen[ino] != 1 {
			t.Fatalf("inode %d has %d replay records, want 1 (%d records in all)", ino, seen[ino], len(recs))
		}
	}
	if len(recs) != letters {
		t.Fatalf("%d replay records, want %d", len(recs), letters)
	}
	t.Logf("%d letters, %d of %d kills hit a live run", letters, landed, kills)
}

// TestTaskCancelMidway: a cancel while a task runs at its rate stops it
// after the chunk under way; every file is in inbox/, replayed and
// recorded, or still in error/ under its own name; nothing staged is
// left, nothing lost; a cancelled task does not resume.
func TestTaskCancelMidway(t *testing.T) {
	t.Parallel()
	letters := testenv.Pick(400, 60)
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	for i := range letters {
		putMessage(t, q, fmt.Sprintf("p%04d.json", i), "not json")
	}
	requireStats(t, "poison", mustRun(t, 0, "consume", q), consumeStats{DeadLetters: letters})
	want := map[uint64]bool{}
	names := map[uint64]string{}
	for ino, name := range inodesIn(t, q, errorStage) {
		want[ino], names[ino] = true, name
	}
	p := start(t, "replay", q, "--all", "--rate", "10")
	waitFor(t, cmdTimeout, "the task's progress", func() bool {
		ts := tasksOf(t, q)
		return len(ts) == 1 && ts[0].Done > 0
	})
	r := mustRun(t, 0, "cancel", q, "1")
	if !strings.HasPrefix(r.stdout, "task 1 cancelled: ") {
		t.Fatalf("cancel:\n%s", r)
	}
	if r := p.wait(t); r.code != 0 || !strings.Contains(r.stdout, "task 1 cancelled: ") {
		t.Fatalf("the cancelled run:\n%s", r)
	}
	moved := requireEachOnce(t, q, want, "after the cancel")
	ts := tasksOf(t, q)
	if ts[0].State != "cancelled" || ts[0].Done != moved || moved == 0 || moved == letters {
		t.Fatalf("task %+v, inbox/ %d of %d", ts[0], moved, letters)
	}
	for ino, name := range inodesIn(t, q, errorStage) {
		if name != names[ino] {
			t.Errorf("error/ holds %s (was %s): a cancelled task leaves files under their names", name, names[ino])
		}
	}
	if n := len(lines(mustRun(t, 0, "replays", q).stdout)) - 1; n != moved {
		t.Errorf("%d replay records, want %d", n, moved)
	}
	if r := run(t, "resume", q, "1"); r.code != 1 || !strings.Contains(r.stderr, "task 1 is cancelled") {
		t.Errorf("resume of a cancelled task: want exit 1\n%s", r)
	}
}

// TestTaskDiscardStale: a discard under "discard_over": 0 waits for
// approval; a file edited in error/ since the request makes the approval
// refused (exit 1), naming it, with nothing removed; asked again, the
// other user's approval discards the set as it is now.
func TestTaskDiscardStale(t *testing.T) {
	t.Parallel()
	as := secondUser(t)
	q := filepath.Join(as.dir, "q")
	mustRun(t, 0, "init", q)
	for i := range 3 {
		putMessage(t, q, fmt.Sprintf("p%d.json", i), "not json")
	}
	if err := os.WriteFile(filepath.Join(q, "spool.conf"), []byte(`{"approval": {"discard_over": 0}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	requireStats(t, "poison", mustRun(t, 0, "consume", q), consumeStats{DeadLetters: 3})
	as.chown(t, q)
	// A replay needs no approval under this policy; a discard does.
	if r := as.run(t, "discard", q, "--reason", "parse", "--note", "junk from a test feed"); r.code != 0 ||
		!strings.HasPrefix(r.stdout, "task 1: discard of 3 files waits for approval") {
		t.Fatalf("request:\n%s", r)
	}
	f, err := os.OpenFile(filepath.Join(q, errorStage, "p1.json"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(" fixed"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r := run(t, "approve", q, "1", "--yes")
	if want := "spool: approve: task 1: 1 of its 3 files changed since the request; p1.json: its body changed: ask again to see the queue as it is now\n"; r.code != 1 || r.stderr != want {
		t.Fatalf("stale approval: want exit 1 and %q\n%s", want, r)
	}
	if n := countNames(t, q, errorStage); n != 3 {
		t.Fatalf("error/ holds %d after a refused approval, want 3", n)
	}
	if r := as.run(t, "discard", q, "--reason", "parse", "--note", "junk, again"); r.code != 0 || !strings.HasPrefix(r.stdout, "task 2: discard of 3 files waits") {
		t.Fatalf("second request:\n%s", r)
	}
	r = mustRun(t, 0, "approve", q, "2", "--yes")
	if !strings.HasSuffix(r.stdout, "task 2 done: 3 of 3 files discarded, 0 gone before, 0 changed since the request\n") {
		t.Fatalf("approval:\n%s", r)
	}
	if n := countNames(t, q, errorStage); n != 0 {
		t.Fatalf("error/ holds %d after the discard, want 0", n)
	}
	ts := tasksOf(t, q)
	if len(ts) != 2 || ts[0].State != "done" || ts[1].State != "waiting" {
		t.Fatalf("tasks: %+v", ts)
	}
	// The first task's set is gone now: approving it is refused too.
	if r := run(t, "approve", q, "1", "--yes"); r.code != 1 || !strings.Contains(r.stderr, "3 of its 3 files changed") {
		t.Fatalf("approval of the stale task:\n%s", r)
	}
}

// TestTaskFilters: the filters select by the recorded detail, the msg_id
// and the ordering key read from the file, and the time of
// dead-lettering, alone or with a reason; a bad one exits 2; a filtered
// replay is a task that moves exactly what it selected.
func TestTaskFilters(t *testing.T) {
	t.Parallel()
	q := filepath.Join(t.TempDir(), "q")
	mustRun(t, 0, "init", q)
	putMessage(t, q, "a.json", "not json")
	putMessage(t, q, "b.json", `{"msg_id":"m1","order_no":"A"}`)
	putMessage(t, q, "c.json", `{"msg_id":"m2","order_no":"B"}`)
	requireStats(t, "poison", mustRun(t, 0, "consume", q), consumeStats{DeadLetters: 3})
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--detail-match", "field is missing$"}, []string{"b.json", "c.json"}},
		{[]string{"--detail-match", "^invalid character"}, []string{"a.json"}},
		{[]string{"--msg-id", "m2"}, []string{"c.json"}},
		{[]string{"--order-no", "A"}, []string{"b.json"}},
		{[]string{"--since", "1h"}, []string{"a.json", "b.json", "c.json"}},
		{[]string{"--until", "1h"}, nil},
		{[]string{"--reason", "missing-field", "--order-no", "B"}, []string{"c.json"}},
		{[]string{"b.json", "c.json", "--msg-id", "m1"}, []string{"b.json"}},
	} {
		r := mustRun(t, 0, append([]string{"replay", q, "--dry-run"}, c.args...)...)
		var got []string
		for _, l := range lines(r.stdout) {
			if n, ok := strings.CutPrefix(l, "would replay "); ok {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, c.want) || !strings.Contains(r.stdout, fmt.Sprintf("\n%d files (sha256 ", len(c.want))) && len(c.want) > 0 {
			t.Errorf("replay --dry-run %q: %q, want %q\n%s", c.args, got, c.want, r)
		}
	}
	for _, bad := range [][]string{{"--detail-match", "("}, {"--since", "yesterday"}, {"--msg-id", ""}, {"--rate", "0"},
		{"--since", "1h", "--until", "2h"}, {"--all", "--reason", "parse", "--order-no", "A"}} {
		if r := run(t, append([]string{"replay", q}, bad...)...); r.code != 2 || len(lines(r.stderr)) != 1 {
			t.Errorf("replay %q: want exit 2 and one line\n%s", bad, r)
		}
	}
	if len(tasksOf(t, q)) != 0 {
		t.Fatal("a dry run or a refusal recorded a task")
	}
	r := mustRun(t, 0, "replay", q, "--order-no", "B", "--note", "B fixed")
	if r.stdout != "task 1: replay of 1 files\nreplayed c.json -> inbox/c.json\ntask 1 done: 1 of 1 files replayed, 0 gone before, 0 changed since the request\n" {
		t.Fatalf("filtered replay:\n%s", r)
	}
	if got := messageNames(t, q, errorStage); !slices.Equal(got, []string{"a.json", "b.json"}) {
		t.Fatalf("error/ %q after the replay of c.json", got)
	}
}
