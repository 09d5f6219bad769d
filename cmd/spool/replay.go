package main

import (
	"context"
	"flag"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/replay"
	"github.com/spoolq/spool/report"
	"github.com/spoolq/spool/task"
)

var replayCommand = &cmdline.Command{
	Name:    "replay",
	Args:    "DIR [FILE...] [--reason R] [--all] [--dry-run] [--force] [filters] [--rate N] [--by USER] [--note TEXT] [contract flags] [--db PATH]",
	Summary: "move dead letters from error/ back to inbox/, all or nothing, recorded in the ledger",
	Options: cmdline.New[replayOpts],
}

// deadOpts are the options replay and discard share: the queue, the
// selection (FILE names, --reason or --all, and the filters), --dry-run,
// --by and --note; validate makes them a task.Request.
type deadOpts struct {
	dir         string
	reason      *string
	all, dryRun *bool
	by, note    *string
	tf          *taskFlags
	cf          *contractFlags
	db          *string
	sel         task.Selection
}

// bind registers the flags of a replay or discard (the verb's) but for
// reason's, all's and dry-run's usage, which say the verb.
func (o *deadOpts) bind(fs *flag.FlagSet, verb string) {
	o.reason = fs.String("reason", "", verb+" every dead letter with reason `R`")
	o.all = fs.Bool("all", false, verb+" every dead letter in error/")
	o.dryRun = fs.Bool("dry-run", false, "print what would be "+verb+"ed; change nothing")
	o.tf = addTaskFlags(fs)
	o.cf = addContractFlags(fs)
	o.db = addDBFlag(fs)
}

func (o *deadOpts) Validate(e *env, pos []string) (err error) {
	if len(pos) == 0 {
		return e.Usage("missing DIR")
	}
	o.dir = pos[0]
	o.sel, err = o.tf.selection(e, pos[1:], *o.reason, e.Given("reason"), *o.all)
	return err
}

// ask hands req to the task service (askTask).
func (o *deadOpts) ask(ctx context.Context, e *env, req task.Request) error {
	return askTask(ctx, e, o.cf, taskRun{dir: o.dir, db: *o.db, dryRun: *o.dryRun, plain: !o.tf.any(), req: req})
}

// replayOpts are spool replay's.
type replayOpts struct {
	deadOpts
	force *bool
}

func (o *replayOpts) Flags(fs *flag.FlagSet) {
	o.bind(fs, "replay")
	o.force = fs.Bool("force", false, "requeue dead letters whose msg_id is already processed")
	o.by = fs.String("by", "", "who replays, for the ledger (default: the OS user)")
	o.note = fs.String("note", "", "why, for the ledger")
}

func (o *replayOpts) Run(ctx context.Context, e *env) error {
	return o.ask(ctx, e, task.Request{Kind: task.Replay, Selection: o.sel, Note: *o.note, Force: *o.force, Rate: o.tf.rate, By: *o.by})
}

// warnFinished says on stderr that a replay a killed run left unfinished
// was finished.
func warnFinished(e *env, f replay.Finished) {
	e.Warn("finished replay %d by %s, interrupted before: %d of its %d files replayed", f.Intent.ID, f.Intent.By, len(f.Replays), len(f.Intent.Items))
}

// startReports has a consumer's start (queueopen.Start) say on stderr
// what it finished and removed.
func startReports(e *env) queueopen.Options {
	return queueopen.Options{
		OnReplayFinished: func(f replay.Finished) { warnFinished(e, f) },
		OnTempRemoved: func(t queue.Temp) {
			e.Warn("removed %s, a temp file a killed writer left (%d bytes)", t.Path(), t.Size)
		},
	}
}

// cell is a name fit for the terminal (report.Terminal).
func cell(s string) string { return report.Terminal(s) }
