package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Helpers of the integrity tests: queue identity, fsck, and the
// crash-safe replay.

// runAt is run with cwd as the working directory, for a relative --db.
func runAt(t testing.TB, cwd string, args ...string) result {
	t.Helper()
	return spoolAt{bin: spoolBin, cwd: cwd}.run(t, args...)
}

// spoolAt runs a spool binary (the one under test, or another build of
// it) in a working directory ("" for the test's), with env (VAR=value)
// added to the test's environment. A started process also copies its
// stderr to tee, when set, as it comes (tests that must read a running
// process's log, such as the address it listens at).
type spoolAt struct {
	bin, cwd string
	env      []string
	tee      io.Writer
}

func (s spoolAt) run(t testing.TB, args ...string) result {
	t.Helper()
	return s.runWithin(t, cmdTimeout, args...)
}

// runWithin runs the binary with args in s's directory and returns what it
// did; it fails the test if the binary cannot be started or does not
// finish within timeout (a hang: a FIFO opened for reading, a lost lock).
func (s spoolAt) runWithin(t testing.TB, timeout time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Dir = s.cwd
	if s.env != nil {
		cmd.Env = append(os.Environ(), s.env...)
	}
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{args: args, stdout: out.String(), stderr: errb.String()}
	if ctx.Err() != nil {
		t.Fatalf("spool %q did not finish within %v (hang?)\n%s", args, timeout, r)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("spool %q: %v", args, err)
	}
	return r
}

func (s spoolAt) mustRun(t testing.TB, want int, args ...string) result {
	t.Helper()
	r := s.run(t, args...)
	if r.code != want {
		t.Fatalf("want exit %d, got\n%s", want, r)
	}
	return r
}

// start is the harness's start for this binary.
func (s spoolAt) start(t testing.TB, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(s.bin, args...), done: make(chan struct{})}
	p.cmd.Dir = s.cwd
	if s.env != nil {
		p.cmd.Env = append(os.Environ(), s.env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errb
	if s.tee != nil {
		p.cmd.Stderr = io.MultiWriter(&p.errb, s.tee)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start spool %q: %v", args, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		p.killed = killed(p.cmd.ProcessState)
		close(p.done)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			// A process that exits by itself (its listener closed first)
			// may be why: say what it printed.
			select {
			case <-p.done:
				t.Logf("it exited by itself: %s", p.result())
				return
			case <-time.After(time.Second):
			}
		}
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// fsck is the package's fsck helper for this binary.
func (s spoolAt) fsck(t testing.TB, want int, q string, args ...string) fsckReport {
	t.Helper()
	r := s.mustRun(t, want, append([]string{"fsck", q, "--json"}, args...)...)
	var rep fsckReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("fsck --json: %v\n%s", err, r)
	}
	return rep
}

// plainSpool returns a spool binary built without the race detector: the
// one under test, or, when that one is race-built (raceSpool), a plain
// build of the same source. For crash tests that need thousands of files and dozens of
// rounds, which the race-instrumented binary (20 to 40 times slower on
// the ledger's SQLite) cannot run in minutes; every other test runs the
// instrumented one over the same code paths.
//
// The plain build is made once, by the first test that asks, beside
// spoolBin, and shared by all.
func plainSpool(t *testing.T) string {
	t.Helper()
	if !raceSpool() {
		return spoolBin
	}
	plain.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			plain.err = fmt.Errorf("go tool not found: %w", err)
			return
		}
		bin := filepath.Join(filepath.Dir(spoolBin), "spool-plain")
		build := exec.Command(goTool, "build", "-o", bin, "github.com/spoolq/spool/cmd/spool")
		if out, err := build.CombinedOutput(); err != nil {
			plain.err = fmt.Errorf("go build: %w\n%s", err, out)
			return
		}
		plain.bin = bin
	})
	if plain.err != nil {
		t.Fatal(plain.err)
	}
	return plain.bin
}

// plain is plainSpool's build, made once.
var plain struct {
	once sync.Once
	bin  string
	err  error
}

// mustRunAt is runAt failing the test unless spool exits with want.
func mustRunAt(t testing.TB, want int, cwd string, args ...string) result {
	t.Helper()
	r := runAt(t, cwd, args...)
	if r.code != want {
		t.Fatalf("in %s: want exit %d, got\n%s", cwd, want, r)
	}
	return r
}

// treeSnapshot describes every entry below each root, the roots included,
// and each root that is a file: the whole queue directory with its ledger
// and queue.id, and ledger files elsewhere. A root that does not exist
// contributes nothing, so that a command creating it shows as "added".
func treeSnapshot(t testing.TB, roots ...string) map[string]file {
	t.Helper()
	snap := map[string]file{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			snap[path] = statFile(t, path)
			return nil
		})
		if err != nil {
			t.Fatalf("snapshot %s: %v", root, err)
		}
	}
	return snap
}

// requireRefusal checks a command refused what it was asked with exit 2 and
// one line on stderr holding every one of want, and changed nothing below
// roots since before.
func requireRefusal(t testing.TB, r result, before map[string]file, roots []string, want ...string) {
	t.Helper()
	if r.code != 2 {
		t.Errorf("want a refusal, exit 2, got\n%s", r)
	}
	if ls := lines(r.stderr); len(ls) != 1 {
		t.Errorf("want one line on stderr, got %d\n%s", len(ls), r)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not say %q\n%s", w, r)
		}
	}
	if d := diffSnapshots(before, treeSnapshot(t, roots...)); len(d) > 0 {
		t.Errorf("spool %q was refused, yet changed: %q", r.args, d)
	}
}

// fsckFinding is one finding of spool fsck --json.
type fsckFinding struct {
	Kind     string   `json:"kind"`
	Count    int      `json:"count"`
	Examples []string `json:"examples"`
	Info     bool     `json:"informational"`
	Text     string   `json:"text"`
}

// fsckReport is the output of spool fsck --json.
type fsckReport struct {
	Queue    string        `json:"queue"`
	QueueID  string        `json:"queue_id"`
	Findings []fsckFinding `json:"findings"`
	// Repairs are --repair's lines.
	Repairs []string `json:"repairs"`
}

// kinds maps each finding's kind to its count.
func (r fsckReport) kinds() map[string]int {
	m := map[string]int{}
	for _, f := range r.Findings {
		m[f.Kind] = f.Count
	}
	return m
}

func (r fsckReport) find(kind string) (fsckFinding, bool) {
	for _, f := range r.Findings {
		if f.Kind == kind {
			return f, true
		}
	}
	return fsckFinding{}, false
}

// fsck runs spool fsck --json with args, requires exit want, and returns
// the report.
func fsck(t testing.TB, want int, q string, args ...string) fsckReport {
	t.Helper()
	r := mustRun(t, want, append([]string{"fsck", q, "--json"}, args...)...)
	var rep fsckReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("fsck --json: %v\n%s", err, r)
	}
	if rep.Findings == nil {
		t.Errorf("fsck --json: findings is null or missing, want an array\n%s", r)
	}
	return rep
}

// requireFindings checks a report's kinds and counts are exactly want.
func requireFindings(t testing.TB, what string, rep fsckReport, want map[string]int) {
	t.Helper()
	got := rep.kinds()
	same := len(got) == len(want)
	for k, n := range want {
		same = same && got[k] == n
	}
	if !same {
		t.Errorf("%s: fsck found %v, want %v\n%+v", what, got, want, rep.Findings)
	}
}

// repairThenClean runs fsck --repair, which must exit 0, and a second
// fsck, which must be clean (no finding at all, or only those in info);
// it returns --repair's lines.
func repairThenClean(t testing.TB, q string, info map[string]int, args ...string) []string {
	t.Helper()
	r := mustRun(t, 0, append([]string{"fsck", q, "--repair"}, args...)...)
	requireFindings(t, "fsck after --repair", fsck(t, 0, q, args...), info)
	return lines(r.stdout)
}

// openLedgerRW opens an SQLite ledger read-write, to damage it on purpose.
func openLedgerRW(t testing.TB, path string) *sql.DB {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("ledger: %v", err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// execLedger runs statements on the SQLite ledger at path and closes it, so
// that spool finds its WAL checkpointed.
func execLedger(t testing.TB, path string, stmts ...string) {
	t.Helper()
	db := openLedgerRW(t, path)
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// execLedgerCreate creates an SQLite database at path with statements, in
// rollback-journal mode, as an application's own database may be.
func execLedgerCreate(t testing.TB, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// queryLedger runs one query returning an int on the ledger at path.
func queryLedger(t testing.TB, path, query string, args ...any) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return count(t, db, query, args...)
}

// readID reads a queue's queue.id, "" when it has none.
func readID(t testing.TB, q string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(q, "queue.id"))
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(string(b), "\n")
}

// redeliver enqueues again, with spool enqueue, a copy of a file of done/:
// a producer delivering a processed message a second time.
func redeliver(t testing.TB, q, name string) {
	t.Helper()
	src := filepath.Join(t.TempDir(), name)
	data, err := os.ReadFile(filepath.Join(q, done, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, 0, "enqueue", q, src)
}

// requireStats checks consume's summary line.
func requireStats(t testing.TB, what string, r result, want consumeStats) {
	t.Helper()
	if got := parseStats(t, r); got != want {
		t.Errorf("%s: %+v, want %+v\n%s", what, got, want, r)
	}
}

// removeLedgerFiles removes an SQLite ledger with its -wal and -shm.
func removeLedgerFiles(t testing.TB, path string) {
	t.Helper()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// auditedSnapshot is a queue's tree without its SQLite ledger's files, and
// the ledger's rows apart from its audit (and the audit's id sequence):
// what a run that only audits itself (fsck --repair finding nothing to
// repair) must leave as it was.
type auditedSnapshot struct {
	tree map[string]file
	rows string
}

func snapshotButAudit(t testing.TB, q string) auditedSnapshot {
	t.Helper()
	tree := treeSnapshot(t, q)
	for p := range tree {
		if p == q || strings.HasPrefix(filepath.Base(p), "ledger.db") {
			delete(tree, p)
		}
	}
	db := openLedger(t, q)
	names, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('spool_audit', 'sqlite_sequence') ORDER BY name`)
	if err != nil {
		t.Fatalf("list ledger tables: %v", err)
	}
	var tables []string
	for names.Next() {
		var n string
		if err := names.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	names.Close()
	var b strings.Builder
	for _, table := range tables {
		rows, err := db.Query(`SELECT * FROM "` + table + `"`)
		if err != nil {
			t.Fatalf("read ledger table %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		var lines []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, fmt.Sprint(vals...))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		slices.Sort(lines)
		fmt.Fprintf(&b, "%s:\n%s\n", table, strings.Join(lines, "\n"))
	}
	return auditedSnapshot{tree: tree, rows: b.String()}
}

// changedButAudit lists what differs between two snapshotButAudit.
func changedButAudit(before, after auditedSnapshot) []string {
	d := diffSnapshots(before.tree, after.tree)
	if before.rows != after.rows {
		d = append(d, "ledger rows (other than the audit) changed from\n"+before.rows+"\nto\n"+after.rows)
	}
	return d
}
