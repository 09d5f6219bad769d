package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"

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
	opts: newOpts[tasksOpts],
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
	opts: newOpts[approveOpts],
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
	opts: newOpts[cancelOpts],
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
	opts: newOpts[resumeOpts],
}

// defaultFiles is how many files of a task's set the approver's view
// lists unless --files says otherwise.
const defaultFiles = 20

// tasksOpts are spool tasks's: the queue, a task's ID (0: all), and how
// to print.
type tasksOpts struct {
	dir    string
	id     int64
	asJSON *bool
	files  *int
	db     *string
}

func (o *tasksOpts) flags(fs *flag.FlagSet) {
	o.asJSON = fs.Bool("json", false, "one JSON array of the tasks (with ID: the task and its first files)")
	o.files = fs.Int("files", defaultFiles, "with ID, list the first `N` files of the set (0: all)")
	o.db = addDBFlag(fs)
}

func (o *tasksOpts) validate(e *env, pos []string) (err error) {
	if err := e.positionals(pos, 1, 2, "DIR"); err != nil {
		return err
	}
	o.dir = pos[0]
	if len(pos) == 2 {
		if o.id, err = taskID(e, pos[1]); err != nil {
			return err
		}
	}
	return checkFiles(e, *o.files)
}

func (o *tasksOpts) run(ctx context.Context, e *env) (err error) {
	// Reading needs neither the contract nor the policy.
	d, l, done, err := openBound(ctx, o.dir, *o.db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	s := &task.Service{Dir: d, Ledger: l}
	if o.id != 0 {
		v, err := s.View(ctx, o.id, *o.files)
		if err != nil {
			return err
		}
		if *o.asJSON {
			return writeJSON(e, v)
		}
		task.WriteView(e.stdout, o.dir, v)
		return nil
	}
	ts, err := s.List(ctx, ledger.TaskQuery{})
	if err != nil {
		return err
	}
	if *o.asJSON {
		if ts == nil {
			ts = []task.Task{}
		}
		return writeJSON(e, ts)
	}
	return task.WriteList(e.stdout, ts)
}

// checkFiles refuses a negative --files.
func checkFiles(e *env, files int) error {
	if files < 0 {
		return e.usage("--files %d: want a number of files >= 0 (0: all)", files)
	}
	return nil
}

// writeJSON prints v as indented JSON.
func writeJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// taskID parses a task's ID.
func taskID(e *env, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, e.usage("task ID %q: want a task's number, as spool tasks lists them", s)
	}
	return id, nil
}

// approveOpts are spool approve's: the queue, the task, and how to
// confirm.
type approveOpts struct {
	dir    string
	id     int64
	yes    *bool
	digest *string
	files  *int
	db     *string
}

func (o *approveOpts) flags(fs *flag.FlagSet) {
	o.yes = fs.Bool("yes", false, "approve without asking (a script): what is printed is approved")
	o.digest = fs.String("digest", "", "approve only a set of this `SHA256` digest (as spool tasks DIR ID printed it)")
	o.files = fs.Int("files", defaultFiles, "list the first `N` files of the set (0: all)")
	o.db = addDBFlag(fs)
}

func (o *approveOpts) validate(e *env, pos []string) (err error) {
	if err := e.positionals(pos, 2, 2, "DIR", "ID"); err != nil {
		return err
	}
	o.dir = pos[0]
	if o.id, err = taskID(e, pos[1]); err != nil {
		return err
	}
	if e.given("digest") && strings.TrimSpace(*o.digest) == "" {
		return e.usage("--digest is empty")
	}
	return checkFiles(e, *o.files)
}

func (o *approveOpts) run(ctx context.Context, e *env) (err error) {
	dir, id := o.dir, o.id
	s, done, err := taskService(ctx, dir, *o.db, nil, false)
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
	v, err := s.View(ctx, id, *o.files)
	if err != nil {
		return err
	}
	task.WriteView(e.stdout, dir, v)
	sum := v.Digest
	if e.given("digest") {
		sum = *o.digest
	}
	if !*o.yes {
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

// cancelOpts are spool cancel's: the queue and the task.
type cancelOpts struct {
	dir string
	id  int64
	db  *string
}

func (o *cancelOpts) flags(fs *flag.FlagSet) { o.db = addDBFlag(fs) }

func (o *cancelOpts) validate(e *env, pos []string) (err error) {
	if err := e.positionals(pos, 2, 2, "DIR", "ID"); err != nil {
		return err
	}
	o.dir = pos[0]
	o.id, err = taskID(e, pos[1])
	return err
}

func (o *cancelOpts) run(ctx context.Context, e *env) (err error) {
	s, done, err := taskService(ctx, o.dir, *o.db, nil, false)
	if err != nil {
		return err
	}
	defer done(&err)
	who, err := cliIdentity(ctx, s, "cancel", "", s.Policy.Set)
	if err != nil {
		return err
	}
	t, err := s.Cancel(ctx, who, o.id)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "task %d cancelled: %d of its %d files begun (a chunk under way finishes)\n", t.ID, t.Next, t.Files)
	return nil
}

// resumeOpts are spool resume's: the queue, and a task's ID (0: resume
// the queue).
type resumeOpts struct {
	dir  string
	id   int64
	note *string
	db   *string
}

func (o *resumeOpts) flags(fs *flag.FlagSet) {
	o.note = fs.String("note", "", "without ID: why the queue is resumed (`TEXT`), in the audit")
	o.db = addDBFlag(fs)
}

func (o *resumeOpts) validate(e *env, pos []string) (err error) {
	if err := e.positionals(pos, 1, 2, "DIR", "ID"); err != nil {
		return err
	}
	o.dir = pos[0]
	if len(pos) == 1 {
		return nil
	}
	if e.given("note") {
		return e.usage("--note is for resuming a queue (spool resume DIR --note TEXT), not a task")
	}
	o.id, err = taskID(e, pos[1])
	return err
}

func (o *resumeOpts) run(ctx context.Context, e *env) (err error) {
	if o.id == 0 {
		return runResumeQueue(ctx, e, o.dir, *o.db, *o.note)
	}
	s, done, err := taskService(ctx, o.dir, *o.db, nil, false)
	if err != nil {
		return err
	}
	defer done(&err)
	who, err := cliIdentity(ctx, s, "run", "", s.Policy.Set)
	if err != nil {
		return err
	}
	if _, err := s.Get(ctx, o.id); err != nil {
		return err
	}
	return runTask(ctx, e, s, who, o.id, o.dir)
}
