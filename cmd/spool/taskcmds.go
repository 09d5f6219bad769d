package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/task"
)

var tasksCommand = &command{
	name:    "tasks",
	args:    "DIR [--json] [--db PATH]",
	summary: "the replay and discard tasks: state, who asked and approved, progress",
	help: `
Lists the durable replay and discard tasks of the queue, newest first: a
replay or discard under an approval policy (spool policy), or with --rate
or a filter (--since, --until, --detail-match, --msg-id, --order-no), is
recorded as a task with the exact file set it selected, and runs in
chunks that a kill -9 cannot split (docs/DESIGN.md, "Tasks").

Columns: id, kind, state (waiting, approved, running, done, cancelled,
failed), files (the set), begun, done, gone (before their chunk), changed
(since the request, left in error/), who asked, who approved, when asked,
the note.

--json prints one JSON array of the tasks, with every field.`,
}

var approveCommand = &command{
	name:    "approve",
	args:    "DIR ID [--db PATH]",
	summary: "approve another operator's waiting task, and run it",
	help: `
Approves task ID, which waits for a second person under the approval
policy (spool policy), and runs it here, printing each file as it moves.
The approver is the OS user: the passwd name of the real uid (under
sudo, the user who ran sudo), never $USER; a uid without a passwd name
is refused (exit 2, audited).

Refused (exit 1, one line, nothing changed, an audit row with the
reason) when the approver asked for the task themselves, in any realm
(a console token of the same name in any case, or whose line says
os=USER, is the same person), when the task is not waiting, or when a
file of its set changed since the request (gone from error/, replaced,
its body edited): those are named, and nothing is moved blindly; ask
again to see the queue as it is now.`,
}

var cancelCommand = &command{
	name:    "cancel",
	args:    "DIR ID [--db PATH]",
	summary: "cancel a task: waiting or approved, it never runs; running, it stops after its chunk",
	help: `
Cancels task ID. A waiting or approved task will never run. A running one
stops after the chunk under way, which finishes: every file of the task
is then moved and recorded, or still in error/ under its own name.
Refused (exit 1) for a task that is done, cancelled or failed.`,
}

var resumeCommand = &command{
	name:    "resume",
	args:    "DIR ID [--db PATH]",
	summary: "run an approved task, or go on with one a kill or a failure stopped",
	help: `
Runs task ID from where it is: an approved task from its start, a running
one whose run was killed (or runs elsewhere: runs share the chunks, each
begun once) or a failed one from its cursor. The chunk a killed run left
under way is finished first, so each file of the set moves once.`,
}

func init() {
	tasksCommand.run = runTasks
	approveCommand.run = runApprove
	cancelCommand.run = runCancel
	resumeCommand.run = runResume
}

func runTasks(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	asJSON := flags.Bool("json", false, "one JSON array of the tasks")
	db := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	_, l, done, err := openBound(ctx, pos[0], *db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	s := &task.Service{Ledger: l}
	ts, err := s.List(ctx, ledger.TaskQuery{})
	if err != nil {
		return err
	}
	if *asJSON {
		if ts == nil {
			ts = []task.Task{}
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(ts)
	}
	return writeTasks(e.stdout, ts)
}

// writeTasks prints tasks as a table, one line each.
func writeTasks(w io.Writer, ts []task.Task) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATE\tFILES\tBEGUN\tDONE\tGONE\tCHANGED\tBY\tAPPROVED BY\tASKED\tNOTE")
	for _, t := range ts {
		approved := t.ApprovedBy
		if approved == "" {
			approved = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, t.State, t.Files, t.Next, t.Done,
			t.Missing, t.Changed, cell(t.By), cell(approved), t.Created.UTC().Format(time.RFC3339), cell(t.Request.Note))
	}
	return tw.Flush()
}

// taskArgs parses DIR ID and --db for approve, cancel and resume.
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
	id, perr := strconv.ParseInt(pos[1], 10, 64)
	if perr != nil || id <= 0 {
		return "", 0, "", e.usage("task ID %q: want a task's number, as spool tasks lists them", pos[1])
	}
	return pos[0], id, *dbf, nil
}

// taskService opens the Service of the queue at dir, with its contract
// and policy.
func taskService(ctx context.Context, dir, db string) (*task.Service, func(*error), error) {
	c, err := (&contractFlags{fs: flag.NewFlagSet("", flag.ContinueOnError)}).contract(dir)
	if err != nil {
		return nil, nil, err
	}
	s, done, err := newService(ctx, dir, db, c, task.NoPolicy)
	if err != nil {
		return nil, nil, err
	}
	if s.Policy, err = ledgerPolicy(ctx, dir, s.Ledger); err != nil {
		done(&err)
		return nil, nil, err
	}
	return s, done, nil
}

func runApprove(ctx context.Context, e *env, args []string) (err error) {
	dir, id, db, err := taskArgs(e, args)
	if err != nil {
		return err
	}
	s, done, err := taskService(ctx, dir, db)
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
	t, err := s.Approve(ctx, who, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "task %d approved: %s of %d files asked by %s\n", t.ID, t.Kind, t.Files, cell(t.By))
	return runTask(ctx, e, s, who, id, dir)
}

func runCancel(ctx context.Context, e *env, args []string) (err error) {
	dir, id, db, err := taskArgs(e, args)
	if err != nil {
		return err
	}
	s, done, err := taskService(ctx, dir, db)
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
	dir, id, db, err := taskArgs(e, args)
	if err != nil {
		return err
	}
	s, done, err := taskService(ctx, dir, db)
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
