package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/task"
)

var tasksCommand = &cmdline.Command{
	Name:    "tasks",
	Args:    "DIR [ID] [--files N] [--json] [--db PATH]",
	Summary: "the replay and discard tasks: state, who asked and approved, what, progress; one task in full",
	Options: cmdline.New[tasksOpts],
}

var approveCommand = &cmdline.Command{
	Name:    "approve",
	Args:    "DIR ID [--yes] [--digest SHA256] [--files N] [--db PATH]",
	Summary: "show another operator's waiting task, and approve it and run it",
	Options: cmdline.New[approveOpts],
}

var cancelCommand = &cmdline.Command{
	Name:    "cancel",
	Args:    "DIR ID [--db PATH]",
	Summary: "cancel a task: waiting or approved, it never runs; running at a rate, it stops after its chunk",
	Options: cmdline.New[cancelOpts],
}

var resumeCommand = &cmdline.Command{
	Name:    "resume",
	Args:    "DIR [--note TEXT] | DIR ID [--db PATH]",
	Summary: "resume a paused queue (DIR), or run a task from where it is (DIR ID)",
	Options: cmdline.New[resumeOpts],
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

func (o *tasksOpts) Flags(fs *flag.FlagSet) {
	o.asJSON = fs.Bool("json", false, "one JSON array of the tasks (with ID: the task and its first files)")
	o.files = fs.Int("files", defaultFiles, "with ID, list the first `N` files of the set (0: all)")
	o.db = addDBFlag(fs)
}

func (o *tasksOpts) Validate(e *env, pos []string) (err error) {
	if err := e.Positionals(pos, 1, 2, "DIR"); err != nil {
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

func (o *tasksOpts) Run(ctx context.Context, e *env) (err error) {
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
		task.WriteView(e.Stdout, o.dir, v)
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
	return task.WriteList(e.Stdout, ts)
}

// checkFiles refuses a negative --files.
func checkFiles(e *env, files int) error {
	if files < 0 {
		return e.Usage("--files %d: want a number of files >= 0 (0: all)", files)
	}
	return nil
}

// writeJSON prints v as indented JSON.
func writeJSON(e *env, v any) error {
	enc := json.NewEncoder(e.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// taskID parses a task's ID.
func taskID(e *env, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, e.Usage("task ID %q: want a task's number, as spool tasks lists them", s)
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

func (o *approveOpts) Flags(fs *flag.FlagSet) {
	o.yes = fs.Bool("yes", false, "approve without asking (a script): what is printed is approved")
	o.digest = fs.String("digest", "", "approve only a set of this `SHA256` digest (as spool tasks DIR ID printed it)")
	o.files = fs.Int("files", defaultFiles, "list the first `N` files of the set (0: all)")
	o.db = addDBFlag(fs)
}

func (o *approveOpts) Validate(e *env, pos []string) (err error) {
	if err := e.Positionals(pos, 2, 2, "DIR", "ID"); err != nil {
		return err
	}
	o.dir = pos[0]
	if o.id, err = taskID(e, pos[1]); err != nil {
		return err
	}
	if e.Given("digest") && strings.TrimSpace(*o.digest) == "" {
		return e.Usage("--digest is empty")
	}
	return checkFiles(e, *o.files)
}

func (o *approveOpts) Run(ctx context.Context, e *env) (err error) {
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
	task.WriteView(e.Stdout, dir, v)
	sum := v.Digest
	if e.Given("digest") {
		sum = *o.digest
	}
	if !*o.yes {
		if !isTerminal(e.Stdin) {
			return &cmdline.UsageError{Msg: fmt.Sprintf("task %d: no terminal to ask on: give --yes to approve it as printed (sha256 %s)", id, v.Digest)}
		}
		fmt.Fprintf(e.Stderr, "approve task %d, %s of %d files asked by %s (sha256 %s)? [y/N] ", id, v.Kind, v.Files, cell(v.By), v.Digest)
		answer, _ := bufio.NewReader(e.Stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			e.Warn("task %d not approved: nothing changed", id)
			return errCheckFailed
		}
	}
	t, err := s.Approve(ctx, who, id, sum)
	if err != nil {
		return taskUsage(err)
	}
	fmt.Fprintf(e.Stdout, "task %d approved: %s of %d files asked by %s\n", t.ID, t.Kind, t.Files, cell(t.By))
	return runTask(ctx, e, s, who, id, dir)
}

// cancelOpts are spool cancel's: the queue and the task.
type cancelOpts struct {
	dir string
	id  int64
	db  *string
}

func (o *cancelOpts) Flags(fs *flag.FlagSet) { o.db = addDBFlag(fs) }

func (o *cancelOpts) Validate(e *env, pos []string) (err error) {
	if err := e.Positionals(pos, 2, 2, "DIR", "ID"); err != nil {
		return err
	}
	o.dir = pos[0]
	o.id, err = taskID(e, pos[1])
	return err
}

func (o *cancelOpts) Run(ctx context.Context, e *env) (err error) {
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
	fmt.Fprintf(e.Stdout, "task %d cancelled: %d of its %d files begun (a chunk under way finishes)\n", t.ID, t.Next, t.Files)
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

func (o *resumeOpts) Flags(fs *flag.FlagSet) {
	o.note = fs.String("note", "", "without ID: why the queue is resumed (`TEXT`), in the audit")
	o.db = addDBFlag(fs)
}

func (o *resumeOpts) Validate(e *env, pos []string) (err error) {
	if err := e.Positionals(pos, 1, 2, "DIR", "ID"); err != nil {
		return err
	}
	o.dir = pos[0]
	if len(pos) == 1 {
		return nil
	}
	if e.Given("note") {
		return e.Usage("--note is for resuming a queue (spool resume DIR --note TEXT), not a task")
	}
	o.id, err = taskID(e, pos[1])
	return err
}

func (o *resumeOpts) Run(ctx context.Context, e *env) (err error) {
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
