//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// badTargets are directories a discard's to may not name, each with what
// the refusal says: missing, inside the queue, the queue's inbox/, a
// file, open to other users.
func badTargets(t *testing.T, q string) map[string]string {
	t.Helper()
	outside := t.TempDir()
	inside := filepath.Join(q, "kept")
	if err := os.Mkdir(inside, 0o700); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(outside, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		fmt.Sprintf("/var/tmp/spool-e2e-missing-%d", time.Now().UnixNano()): "no such file or directory",
		inside:                               "is inside the queue",
		filepath.Join(q, inbox):              "is inside the queue",
		writeFile(t, outside, "a-file", "x"): "not a directory",
		open:                                 "is open to other users (mode 0755)",
	}
}

// TestToRefusedAtRequest: a discard's destination that cannot take the
// files is refused when it is asked, alike on the command line (exit 2,
// one line) and over the API (400): nothing is recorded, nothing moves,
// and the refusal is an audit row. The API used to record such a task
// and fail only once it ran, after its approval; with no policy, a
// world-open directory got the dead letters at once.
func TestToRefusedAtRequest(t *testing.T) {
	t.Parallel()
	q, base := consoleQueue(t, 2, 2)
	errBefore := countNames(t, q, errorStage)
	bad := badTargets(t, q)
	for to, why := range bad {
		r := run(t, "discard", q, "--all", "--note", "x", "--to", to)
		if r.code != 2 || len(lines(r.stderr)) != 1 || !strings.Contains(r.stderr, "--to "+to) || !strings.Contains(r.stderr, why) {
			t.Errorf("discard --to %s: want exit 2 and one line saying %q\n%s", to, why, r)
		}
		code, body := apiCall(t, base, "olga-token", "POST", "/api/v1/discards", fmt.Sprintf(`{"all": true, "note": "x", "to": %q}`, to))
		if code != 400 || !strings.Contains(body, why) {
			t.Errorf("POST discards to %s: %d %s, want 400 saying %q", to, code, body, why)
		}
	}
	if ts := tasksOf(t, q); len(ts) != 0 {
		t.Errorf("refused requests recorded tasks: %+v", ts)
	}
	if n := countNames(t, q, errorStage); n != errBefore {
		t.Errorf("error/ holds %d files after the refusals, want %d", n, errBefore)
	}
	refused := 0
	for _, row := range taskAuditRows(t, q) {
		if row.Action == "discard" && row.Outcome == "refused" && strings.HasPrefix(row.Detail, "to ") {
			refused++
		}
	}
	if want := 2 * len(bad); refused != want {
		t.Errorf("%d audit rows of refused destinations, want %d (one a request)", refused, want)
	}
}

// approvalQueue makes a queue of n parse failures under a policy that
// makes every replay and discard wait, owned by the second OS user as,
// and a directory kept for a discard, closed to others.
func approvalQueue(t *testing.T, as *osUserAs, n int) (q, kept string) {
	t.Helper()
	q = filepath.Join(as.dir, "q")
	mustRun(t, 0, "init", q)
	for i := range n {
		putMessage(t, q, fmt.Sprintf("p%02d.json", i), fmt.Sprintf("not json %d", i))
	}
	writeFile(t, q, "spool.conf", `{"approval": {"replay_over": 0, "discard_over": 0}}`)
	requireStats(t, "poison", mustRun(t, 0, "consume", q), consumeStats{DeadLetters: n})
	kept = filepath.Join(as.dir, "kept")
	if err := os.Mkdir(kept, 0o700); err != nil {
		t.Fatal(err)
	}
	as.chown(t, q)
	as.chown(t, kept)
	return q, kept
}

// TestApproverSees: spool approve prints, before it acts, what it would
// approve: the kind, who asked and why, the destination, force and the
// rate, the set's digest and its files, the first N and how many more;
// without a terminal and without --yes it approves nothing (exit 2, one
// line); with a --digest of another set it is refused (exit 1); with
// --yes it approves the set it printed and runs it. spool tasks DIR ID
// shows the same.
func TestApproverSees(t *testing.T) {
	t.Parallel()
	as := secondUser(t)
	q, kept := approvalQueue(t, as, 25)
	if r := as.run(t, "discard", q, "--all", "--note", "feed junk", "--to", kept); r.code != 0 || !strings.HasPrefix(r.stdout, "task 1: discard of 25 files waits for approval") {
		t.Fatalf("request:\n%s", r)
	}
	if r := as.run(t, "replay", q, "p03.json", "--force", "--rate", "100", "--note", "try it again"); r.code != 0 || !strings.HasPrefix(r.stdout, "task 2: replay of 1 files waits") {
		t.Fatalf("second request:\n%s", r)
	}
	digest := tasksOf(t, q)[1].Digest

	view := mustRun(t, 0, "tasks", q, "1", "--files", "5").stdout
	for _, want := range []string{
		"task 1: discard of 25 files, waiting\n", "asked by   os:" + asker + " via cli", "why        feed junk\n", "selection  all\n",
		"to         " + kept + " (moved there", "rate       no limit", "digest     sha256 " + digest + "\n", "files      25:\n",
		"    p00.json (reason parse, sha256 " + sha("not json 0") + ", 10 bytes)\n", "    p04.json (", "    and 20 more (spool tasks " + q + " 1 --files 0",
	} {
		if !strings.Contains(view, want) {
			t.Errorf("spool tasks q 1 lacks %q:\n%s", want, view)
		}
	}
	if strings.Contains(view, "p05.json") {
		t.Errorf("spool tasks q 1 --files 5 lists a sixth file:\n%s", view)
	}
	if v := mustRun(t, 0, "tasks", q, "2").stdout; !strings.Contains(v, "force      yes") || !strings.Contains(v, "rate       100 files a second") ||
		!strings.Contains(v, "selection  p03.json\n") || !strings.Contains(v, "why        try it again\n") {
		t.Errorf("spool tasks q 2 does not show --force and --rate:\n%s", v)
	}

	// No terminal and no --yes: the view, then a refusal; nothing approved.
	r := run(t, "approve", q, "1")
	if r.code != 2 || len(lines(r.stderr)) != 1 || !strings.Contains(r.stderr, "give --yes") || !strings.Contains(r.stdout, "digest     sha256 "+digest) {
		t.Errorf("approve without a terminal or --yes: want the view and exit 2 with one line\n%s", r)
	}
	// Another digest than the task's: refused.
	other := strings.Repeat("0", 64)
	r = run(t, "approve", q, "1", "--yes", "--digest", other)
	if r.code != 1 || len(lines(r.stderr)) != 1 || !strings.Contains(r.stderr, "the approval names set sha256 "+other) {
		t.Errorf("approve --digest of another set: want exit 1 and one line\n%s", r)
	}
	if ts := tasksOf(t, q); ts[1].State != "waiting" || countNames(t, q, errorStage) != 25 {
		t.Fatalf("after the refused approvals: task %+v, error/ %d files", ts[1], countNames(t, q, errorStage))
	}

	r = mustRun(t, 0, "approve", q, "1", "--yes", "--digest", digest, "--files", "3")
	for _, want := range []string{"to         " + kept, "digest     sha256 " + digest, "    and 22 more", "task 1 approved: discard of 25 files asked by os:" + asker + "\n",
		"discarded p00.json -> " + kept + "/p00.json (sha256 ", "task 1 done: 25 of 25 files discarded, 0 gone before, 0 changed since the request\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("approve --yes lacks %q:\n%s", want, r.stdout)
		}
	}
	if n := countNames(t, kept, "."); n != 25 {
		t.Errorf("%s holds %d files, want the 25 discarded", kept, n)
	}
	var sel map[string]any
	for _, row := range taskAuditRows(t, q) {
		if row.Action == "approve" && row.Outcome == "ok" {
			if err := json.Unmarshal(row.Selection, &sel); err != nil || sel["digest"] != digest {
				t.Errorf("the approval's audit row does not name the digest approved: %s", row.Selection)
			}
		}
	}
}

// TestApproveOnTerminal: on a terminal spool approve asks, after the
// view; anything but y approves nothing (exit 1), y approves and runs.
func TestApproveOnTerminal(t *testing.T) {
	t.Parallel()
	as := secondUser(t)
	q, _ := approvalQueue(t, as, 3)
	if r := as.run(t, "replay", q, "--all", "--note", "parser fixed"); r.code != 0 {
		t.Fatalf("request:\n%s", r)
	}
	stdout, tty, code := approveOnTerminal(t, "n\n", "approve", q, "1")
	if code != 1 || !strings.Contains(tty, "approve task 1, replay of 3 files asked by os:"+asker) || !strings.Contains(tty, "not approved: nothing changed") ||
		strings.Contains(stdout, "approved:") {
		t.Errorf("answer n: exit %d\nstdout:\n%s\nterminal:\n%q", code, stdout, tty)
	}
	if ts := tasksOf(t, q); ts[0].State != "waiting" {
		t.Fatalf("task %+v after n, want waiting", ts[0])
	}
	stdout, tty, code = approveOnTerminal(t, "y\n", "approve", q, "1")
	if code != 0 || !strings.Contains(stdout, "task 1 approved: replay of 3 files") || !strings.Contains(stdout, "task 1 done: 3 of 3 files replayed") {
		t.Errorf("answer y: exit %d\nstdout:\n%s\nterminal:\n%q", code, stdout, tty)
	}
}

// approveOnTerminal runs spool with stdin and stderr a pseudo-terminal on
// which answer is typed, and returns stdout, what reached the terminal
// and the exit status.
func approveOnTerminal(t *testing.T, answer string, args ...string) (stdout, tty string, code int) {
	t.Helper()
	ptm, pts, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here (%v)", err)
	}
	defer ptm.Close()
	cmd := exec.Command(spoolBin, args...)
	var out bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, &out, pts
	if err := cmd.Start(); err != nil {
		pts.Close()
		t.Fatal(err)
	}
	pts.Close()
	if _, err := io.WriteString(ptm, answer); err != nil {
		t.Fatal(err)
	}
	var term bytes.Buffer
	read := make(chan struct{})
	go func() { _, _ = io.Copy(&term, ptm); close(read) }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(cmdTimeout):
		_ = cmd.Process.Kill()
		t.Fatalf("spool %q did not finish within %v", args, cmdTimeout)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal was not closed after spool exited")
	}
	return out.String(), term.String(), code
}

// TestAPIApproverSees: the API's task shows what an approver approves
// (the file count, its first page of files and GET .../files for the
// others, the digest, to, force, rate, the filters, who asked and why),
// and an approval names the digest it saw: none is 400, another 409,
// nothing approved; the task's is taken.
func TestAPIApproverSees(t *testing.T) {
	t.Parallel()
	_, base := consoleQueue(t, 3, 2)
	kept := filepath.Join(t.TempDir(), "kept")
	if err := os.Mkdir(kept, 0o700); err != nil {
		t.Fatal(err)
	}
	code, body := apiCall(t, base, "olga-token", "POST", "/api/v1/discards",
		fmt.Sprintf(`{"reason": "missing-field", "detail_match": "required field", "note": "old feed", "to": %q}`, kept))
	if code != 201 {
		t.Fatalf("POST discards: %d %s", code, body)
	}
	id, state := taskOf(t, body)
	if state != "waiting" {
		t.Fatalf("a discard under discard_over 0: %s, want waiting", state)
	}
	code, body = apiCall(t, base, "ada-token", "GET", fmt.Sprintf("/api/v1/tasks/%d", id), "")
	var v struct {
		Kind, State, Digest, By, Via string
		Files                        int
		Request                      struct {
			Note, To  string
			Force     *bool
			Rate      *float64
			Selection map[string]any
		}
		FileList struct {
			Items []struct {
				File, SHA256, Reason string
				Size                 int64
			}
			Total int
			Next  *int
		} `json:"file_list"`
	}
	if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil {
		t.Fatalf("GET task: %d %v\n%s", code, err, body)
	}
	if v.Kind != "discard" || v.Files != 3 || v.By != "token:olga" || v.Via != "http" || len(v.Digest) != 64 || v.Request.Note != "old feed" ||
		v.Request.To != kept || v.Request.Force == nil || *v.Request.Force || v.Request.Rate == nil || *v.Request.Rate != 0 ||
		v.Request.Selection["reason"] != "missing-field" || v.Request.Selection["detail_match"] != "required field" {
		t.Errorf("GET task: %+v\n%s", v, body)
	}
	if v.FileList.Total != 3 || len(v.FileList.Items) != 3 || v.FileList.Next != nil || v.FileList.Items[0].File != "order-000.json" ||
		len(v.FileList.Items[0].SHA256) != 64 || v.FileList.Items[0].Reason != "missing-field" || v.FileList.Items[0].Size == 0 {
		t.Errorf("GET task's file_list: %+v", v.FileList)
	}
	code, body = apiCall(t, base, "ada-token", "GET", fmt.Sprintf("/api/v1/tasks/%d/files?offset=1&limit=1", id), "")
	if code != 200 || !strings.Contains(body, `"file": "order-001.json"`) || !strings.Contains(body, `"next": 2`) || !strings.Contains(body, `"total": 3`) {
		t.Errorf("GET files?offset=1&limit=1: %d %s", code, body)
	}
	if code, body := apiCall(t, base, "ada-token", "GET", fmt.Sprintf("/api/v1/tasks/%d/files?limit=0", id), ""); code != 400 {
		t.Errorf("GET files?limit=0: %d %s, want 400", code, body)
	}

	approve := fmt.Sprintf("/api/v1/tasks/%d/approve", id)
	for _, c := range []struct {
		body string
		code int
	}{{"", 400}, {`{}`, 400}, {`{"digest": "` + strings.Repeat("0", 64) + `"}`, 409}, {`{"digest": 5}`, 400}} {
		if code, body := apiCall(t, base, "ada-token", "POST", approve, c.body); code != c.code {
			t.Errorf("approve with %q: %d %s, want %d", c.body, code, body, c.code)
		}
	}
	if code, body := apiCall(t, base, "ada-token", "GET", fmt.Sprintf("/api/v1/tasks/%d", id), ""); code != 200 || !strings.Contains(body, `"state": "waiting"`) {
		t.Fatalf("after the refused approvals: %d %s", code, body)
	}
	if code, body := apiCall(t, base, "ada-token", "POST", approve, `{"digest": "`+v.Digest+`"}`); code != 200 {
		t.Fatalf("approve with the task's digest: %d %s", code, body)
	}
	waitFor(t, cmdTimeout, "the 3 files discarded to "+kept, func() bool { return countNames(t, kept, ".") == 3 })
}
