package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/task"
)

var tasksCommand = &command{
	name:    "tasks",
	args:    "DIR [ID] [--files N] [--json] [--db PATH]",
	summary: "the replay and discard tasks: state, who asked and approved, what, progress; one task in full",
	help: `
Every spool replay and spool discard, and every replay or discard asked
over the HTTP API, is a task (docs/DESIGN.md, "Tasks"): recorded with
what was asked and the exact file set it selected, approved (at once, or
by a second person under the approval policy: spool policy), then run.
Without ID, lists them newest first.

Columns: id, kind, state (waiting, approved, running, done, cancelled,
failed), files (the set), begun, done, gone (before their chunk), changed
(since the request, left in error/), who asked, who approved, when asked,
what was asked (the selection, its filters, and --to, --force, --rate
when given) and the note.

With ID, shows that task as an approver sees it (spool approve prints the
same before it asks): the kind and state, who asked, when and why, the
selection with its filters, --to (where a discard moves the files, or
that it deletes them), --force, --rate, the digest of the set (sha256 of
each file's name, inode and body hash, in order) and its files, the first
N (--files N, 20 by default; 0 lists them all) each with its reason,
msg_id, body hash and size, and how many more there are.

--json prints one JSON array of the tasks, with every field; with ID, the
task as GET /api/v1/tasks/ID answers it, its first N files under
"file_list".`,
}

var approveCommand = &command{
	name:    "approve",
	args:    "DIR ID [--yes] [--digest SHA256] [--files N] [--db PATH]",
	summary: "show another operator's waiting task, and approve it and run it",
	help: `
Approves task ID, which waits for a second person under the approval
policy (spool policy), and runs it here, printing each file as it moves.
The approver is the OS user: the passwd name of the real uid (under
sudo, the user who ran sudo), never $USER; a uid without a passwd name
is refused (exit 2, audited).

Before it acts it prints the task as spool tasks DIR ID does: the kind,
who asked and why, the selection and its filters, --to, --force, --rate,
the digest of the set and its files (the first N, --files N, and how
many more). Then it asks for a confirmation on the terminal (y to
approve). The approval names the digest it printed: it approves exactly
that set. --yes approves without asking, for a script; without a
terminal and without --yes it approves nothing (exit 2). --digest SHA256
approves only a set with that digest (one printed earlier by spool tasks
DIR ID): another is refused.

Refused (exit 1, one line, nothing changed, an audit row with the
reason) when the approver asked for the task themselves, in any realm
(a console token of the same name in any case, or whose line says
os=USER, is the same person), when the task is not waiting, when
--digest names another set, or when a file of its set
changed since the request (gone from error/, replaced, its body edited):
those are named, and nothing is moved blindly; ask again to see the queue
as it is now. Answering anything but y at the question approves nothing
(exit 1).`,
}

var cancelCommand = &command{
	name:    "cancel",
	args:    "DIR ID [--db PATH]",
	summary: "cancel a task: waiting or approved, it never runs; running at a rate, it stops after its chunk",
	help: `
Cancels task ID. A waiting or approved task will never run. A running one
(with --rate: chunks) stops after the chunk under way, which finishes:
every file of the task is then moved and recorded, or still in error/
under its own name. Refused (exit 1) for a task that is done, cancelled
or failed, and for a running task whose every file is in a chunk begun
(a task without --rate is one chunk, all or nothing).`,
}

var resumeCommand = &command{
	name:    "resume",
	args:    "DIR [--note TEXT] | DIR ID [--db PATH]",
	summary: "resume a paused queue (DIR), or run a task from where it is (DIR ID)",
	help: `
spool resume DIR resumes the queue that spool pause DIR paused: within
about a second its consumers, on every host, claim and call again. A
queue that is not paused is left so (exit 0, said). --note TEXT says why,
in the audit (action resume).

spool resume DIR ID runs task ID from where it is: an approved task from
its start, a running one whose run was killed (or runs elsewhere: runs
share the chunks, each begun once) or a failed one from its cursor. The
chunk a killed run left under way is finished first, so each file of the
set moves once. ID is a task's number, as spool tasks lists them.

The two share a name as their opposites do (pause and resume a queue,
cancel and resume a task): the number of arguments says which is meant,
and a second argument that is not a task's number is refused (exit 2).`,
}

func init() {
	tasksCommand.run = runTasks
	approveCommand.run = runApprove
	cancelCommand.run = runCancel
	resumeCommand.run = runResume
}

// defaultFiles is how many files of a task's set the approver's view
// lists unless --files says otherwise.
const defaultFiles = 20

func runTasks(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	asJSON := flags.Bool("json", false, "one JSON array of the tasks (with ID: the task and its first files)")
	files := flags.Int("files", defaultFiles, "with ID, list the first `N` files of the set (0: all)")
	db := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 1, 2, "DIR"); err != nil {
		return err
	}
	var id int64
	if len(pos) == 2 {
		if id, err = taskID(e, pos[1]); err != nil {
			return err
		}
	}
	if *files < 0 {
		return e.usage("--files %d: want a number of files >= 0 (0: all)", *files)
	}
	// Reading needs neither the contract nor the policy.
	d, l, done, err := openBound(ctx, pos[0], *db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	s := &task.Service{Dir: d, Ledger: l}
	if id != 0 {
		v, err := s.View(ctx, id, *files)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(e, v)
		}
		writeView(e, pos[0], v)
		return nil
	}
	ts, err := s.List(ctx, ledger.TaskQuery{})
	if err != nil {
		return err
	}
	if *asJSON {
		if ts == nil {
			ts = []task.Task{}
		}
		return writeJSON(e, ts)
	}
	return writeTasks(e.stdout, ts)
}

// writeJSON prints v as indented JSON.
func writeJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeTasks prints tasks as a table, one line each.
func writeTasks(w io.Writer, ts []task.Task) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATE\tFILES\tBEGUN\tDONE\tGONE\tCHANGED\tBY\tAPPROVED BY\tASKED\tWHAT\tNOTE")
	for _, t := range ts {
		approved := t.ApprovedBy
		if approved == "" {
			approved = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, t.State, t.Files, t.Next, t.Done,
			t.Missing, t.Changed, cell(t.By), cell(approved), t.Created.UTC().Format(time.RFC3339), cell(what(t.Request)), cell(t.Request.Note))
	}
	return tw.Flush()
}

// what says in one line what a request asked: its selection, its filters
// and the options given.
func what(r task.Request) string {
	s := r.Selection
	var parts []string
	switch {
	case len(s.Names) == 1:
		parts = append(parts, s.Names[0])
	case len(s.Names) > 1:
		parts = append(parts, fmt.Sprintf("%d names", len(s.Names)))
	case s.Reason != "":
		parts = append(parts, "reason "+s.Reason)
	case s.All:
		parts = append(parts, "all")
	}
	for _, f := range []struct{ name, val string }{{"since", timeText(s.Since)}, {"until", timeText(s.Until)},
		{"detail-match", s.DetailMatch}, {"msg-id", s.MsgID}, {"order-no", s.OrderNo}, {"to", r.To}} {
		if f.val != "" {
			parts = append(parts, fmt.Sprintf("--%s %s", f.name, f.val))
		}
	}
	if r.Force {
		parts = append(parts, "--force")
	}
	if r.Rate > 0 {
		parts = append(parts, fmt.Sprintf("--rate %g", r.Rate))
	}
	return strings.Join(parts, " ")
}

// timeText is t in RFC 3339 UTC, "" for none.
func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// writeView prints task v as an approver sees it: what it does, to which
// files, asked by whom and why.
func writeView(e *env, dir string, v task.View) {
	t, w := v.Task, e.stdout
	fmt.Fprintf(w, "task %d: %s of %d files, %s\n", t.ID, t.Kind, t.Files, t.State)
	asked := cell(t.By)
	if t.Role != "" {
		asked += " (" + t.Role + ")"
	}
	fmt.Fprintf(w, "  asked by   %s via %s, %s\n", asked, t.Via, timeText(t.Created))
	why := t.Request.Note
	if why == "" {
		why = "-"
	}
	fmt.Fprintf(w, "  why        %s\n", cell(why))
	fmt.Fprintf(w, "  selection  %s\n", cell(what(task.Request{Selection: t.Request.Selection})))
	if t.Kind == task.Discard {
		to := "none: the files are deleted"
		if t.Request.To != "" {
			to = cell(t.Request.To) + " (moved there with their own modes; the directory is closed to other users)"
		}
		fmt.Fprintf(w, "  to         %s\n", to)
	} else {
		force := "no"
		if t.Request.Force {
			force = "yes: dead letters whose msg_id is processed already are replayed too"
		}
		fmt.Fprintf(w, "  force      %s (%d selected left out: processed already)\n", force, t.Skipped)
	}
	rate := "no limit: the set moves as one chunk, all or nothing"
	if t.Request.Rate > 0 {
		rate = fmt.Sprintf("%g files a second, in chunks a cancel can stop between", t.Request.Rate)
	}
	fmt.Fprintf(w, "  rate       %s\n", rate)
	fmt.Fprintf(w, "  digest     sha256 %s\n", t.Digest)
	if t.ApprovedBy != "" {
		fmt.Fprintf(w, "  approved   by %s, %s\n", cell(t.ApprovedBy), timeText(t.Approved))
	}
	if t.State != task.StateWaiting && t.State != task.StateApproved {
		fmt.Fprintf(w, "  progress   %d begun, %d done, %d gone before, %d changed since the request\n", t.Next, t.Done, t.Missing, t.Changed)
	}
	if t.Detail != "" {
		fmt.Fprintf(w, "  detail     %s\n", cell(t.Detail))
	}
	fmt.Fprintf(w, "  files      %d:\n", t.Files)
	for _, f := range v.FileList.Items {
		var about []string
		for _, a := range []struct{ k, v string }{{"reason", f.Reason}, {"msg_id", f.MsgID}} {
			if a.v != "" {
				about = append(about, a.k+" "+cell(a.v))
			}
		}
		about = append(about, "sha256 "+hashText(f.SHA256), fmt.Sprintf("%d bytes", f.Size))
		if f.Changed != "" {
			about = append(about, "changed: "+f.Changed)
		}
		fmt.Fprintf(w, "    %s (%s)\n", cell(f.File), strings.Join(about, ", "))
	}
	if more := t.Files - len(v.FileList.Items); more > 0 {
		fmt.Fprintf(w, "    and %d more (spool tasks %s %d --files 0 lists them all)\n", more, dir, t.ID)
	}
}

// taskID parses a task's ID.
func taskID(e *env, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, e.usage("task ID %q: want a task's number, as spool tasks lists them", s)
	}
	return id, nil
}

// taskArgs parses DIR ID and --db for cancel and resume.
func taskArgs(e *env, args []string) (dir string, id int64, db string, err error) {
	flags := e.flagSet()
	dbf := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return "", 0, "", err
	}
	if err := e.positionals(pos, 2, 2, "DIR", "ID"); err != nil {
		return "", 0, "", err
	}
	id, err = taskID(e, pos[1])
	return pos[0], id, *dbf, err
}

func runApprove(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	yes := flags.Bool("yes", false, "approve without asking (a script): what is printed is approved")
	digest := flags.String("digest", "", "approve only a set of this `SHA256` digest (as spool tasks DIR ID printed it)")
	files := flags.Int("files", defaultFiles, "list the first `N` files of the set (0: all)")
	db := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 2, 2, "DIR", "ID"); err != nil {
		return err
	}
	id, err := taskID(e, pos[1])
	if err != nil {
		return err
	}
	if given(flags, "digest") && strings.TrimSpace(*digest) == "" {
		return e.usage("--digest is empty")
	}
	if *files < 0 {
		return e.usage("--files %d: want a number of files >= 0 (0: all)", *files)
	}
	dir := pos[0]
	s, done, err := taskService(ctx, dir, *db, nil, false)
	if err != nil {
		return err
	}
	defer done(&err)
	// An approval is four eyes whatever the policy: the approver must be
	// someone the OS names.
	who, err := cliIdentity(ctx, s, "approve", "", true)
	if err != nil {
		return err
	}
	if _, err := s.Review(ctx, who, id); err != nil {
		return err
	}
	v, err := s.View(ctx, id, *files)
	if err != nil {
		return err
	}
	writeView(e, dir, v)
	sum := v.Digest
	if given(flags, "digest") {
		sum = *digest
	}
	if !*yes {
		if !isTerminal(e.stdin) {
			return &usageError{msg: fmt.Sprintf("task %d: no terminal to ask on: give --yes to approve it as printed (sha256 %s)", id, v.Digest)}
		}
		fmt.Fprintf(e.stderr, "approve task %d, %s of %d files asked by %s (sha256 %s)? [y/N] ", id, v.Kind, v.Files, cell(v.By), v.Digest)
		answer, _ := bufio.NewReader(e.stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			e.warn("task %d not approved: nothing changed", id)
			return errCheckFailed
		}
	}
	t, err := s.Approve(ctx, who, id, sum)
	if err != nil {
		return taskUsage(err)
	}
	fmt.Fprintf(e.stdout, "task %d approved: %s of %d files asked by %s\n", t.ID, t.Kind, t.Files, cell(t.By))
	return runTask(ctx, e, s, who, id, dir)
}

func runCancel(ctx context.Context, e *env, args []string) (err error) {
	dir, id, db, err := taskArgs(e, args)
	if err != nil {
		return err
	}
	s, done, err := taskService(ctx, dir, db, nil, false)
	if err != nil {
		return err
	}
	defer done(&err)
	who, err := cliIdentity(ctx, s, "cancel", "", s.Policy.Set)
	if err != nil {
		return err
	}
	t, err := s.Cancel(ctx, who, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "task %d cancelled: %d of its %d files begun (a chunk under way finishes)\n", t.ID, t.Next, t.Files)
	return nil
}

func runResume(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	note := flags.String("note", "", "without ID: why the queue is resumed (`TEXT`), in the audit")
	dbf := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 1, 2, "DIR", "ID"); err != nil {
		return err
	}
	if len(pos) == 1 {
		return runResumeQueue(ctx, e, pos[0], *dbf, *note)
	}
	if given(flags, "note") {
		return e.usage("--note is for resuming a queue (spool resume DIR --note TEXT), not a task")
	}
	dir, db := pos[0], *dbf
	id, err := taskID(e, pos[1])
	if err != nil {
		return err
	}
	s, done, err := taskService(ctx, dir, db, nil, false)
	if err != nil {
		return err
	}
	defer done(&err)
	who, err := cliIdentity(ctx, s, "run", "", s.Policy.Set)
	if err != nil {
		return err
	}
	if _, err := s.Get(ctx, id); err != nil {
		return err
	}
	return runTask(ctx, e, s, who, id, dir)
}
