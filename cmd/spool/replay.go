package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/replay"
	"github.com/spoolq/spool/report"
	"github.com/spoolq/spool/task"
)

var replayCommand = &command{
	name:    "replay",
	args:    "DIR [FILE...] [--reason R] [--all] [--dry-run] [--force] [filters] [--rate N] [--by USER] [--note TEXT] [contract flags] [--db PATH]",
	summary: "move dead letters from error/ back to inbox/, all or nothing, recorded in the ledger",
	help: `
Moves dead letters from error/ back to inbox/ to be consumed again, and
records every replay in the ledger (when, who, why: see spool replays).
Select exactly one way: FILE names, --reason R (every dead letter whose
reason is R, e.g. handler, or unknown for files without a record), or --all.

All or nothing: a name with / or .. (exit 2) or a name not in error/
(exit 1) changes nothing. A name already in inbox/ gets a ~N suffix. The
replay is committed to the ledger, with every file it selected, before the
first file moves; one killed at any instant is finished by the next
spool replay, spool consume or spool fsck --repair, so in the end every
selected file was replayed, with one replay record each, or none was.

The ledger is consulted first: a dead letter whose msg_id is already in
processed (it was sent again and processed meanwhile) is not requeued, and
is reported as "skip NAME: msg_id X already processed"; --force requeues it
anyway (the ledger will absorb it as a duplicate, or flag a conflict if
the bodies differ). The msg_id is read from the file with the queue's
contract (spool.conf, or --key), or else is the one the ledger recorded.

--dry-run prints what would be replayed and changes nothing, in the queue
or in the ledger.

Filters narrow the selection (alone, they select among all dead letters):
--since T and --until T on the time of dead-lettering (RFC 3339, or a
duration ago such as 24h), --detail-match REGEX on the recorded detail,
--msg-id ID, --order-no K. With a filter or --rate N (files a second),
or under an approval policy (replay_over=N: spool policy), the replay
is a task run in chunks (spool tasks): recorded with the exact
files it selected, run in chunks a kill -9 cannot split (spool resume
goes on), cancelled by spool cancel without losing a file. Over the
policy's N it moves nothing: it prints the task's id and count, and
waits for spool approve by another operator; under a policy --by may
only name the OS user (exit 2). Without them it is a task of one move,
listed by spool tasks with the others and ended done when the move is,
which spool cancel cannot stop once begun (it is all or nothing).

Prints one line per file, in the order given (name order for --reason and
--all):
  replayed NAME -> inbox/NEWNAME
  would replay NAME                      (--dry-run)
  skip NAME: msg_id X already processed`,
}

func init() { replayCommand.run = runReplay }

func runReplay(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	reason := flags.String("reason", "", "replay every dead letter with reason `R`")
	all := flags.Bool("all", false, "replay every dead letter in error/")
	dryRun := flags.Bool("dry-run", false, "print what would be replayed; change nothing")
	force := flags.Bool("force", false, "requeue dead letters whose msg_id is already processed")
	by := flags.String("by", "", "who replays, for the ledger (default: the OS user)")
	note := flags.String("note", "", "why, for the ledger")
	tf := addTaskFlags(flags)
	cf := addContractFlags(flags)
	db := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return e.usage("missing DIR")
	}
	dir, names := pos[0], pos[1:]
	if given(flags, "reason") && *reason == "" {
		if len(names) > 0 || *all {
			return e.usage("give FILE names, --reason or --all, not several")
		}
		return e.usage("--reason is empty")
	}
	// Under an approval policy, or with a filter or --rate, the replay is
	// a task run in chunks (package task); otherwise it is one move, all
	// or nothing, recorded as a task of one chunk (replay.ExecuteTask).
	if policy, err := readPolicy(ctx, dir, *db, !*dryRun); err != nil {
		return err
	} else if policy.Set || tf.any() {
		tsel, err := tf.selection(e, names, *reason, *all)
		if err != nil {
			return err
		}
		contract, err := cf.contract(dir)
		if err != nil {
			return err
		}
		return runAsTask(ctx, e, taskRun{dir: dir, db: *db, by: *by, dryRun: *dryRun, contract: contract, policy: policy,
			req: task.Request{Kind: task.Replay, Selection: tsel, Note: *note, Force: *force, Rate: tf.rate}})
	}
	sel := replay.Selection{Names: names, Reason: *reason, All: *all}
	// Path-like names are refused, all of them, before anything is opened.
	switch err := sel.Check(); {
	case errors.Is(err, replay.ErrNoSelection):
		return e.usage("missing FILE (or --reason R, or --all)")
	case errors.Is(err, replay.ErrManySelections):
		return e.usage("give FILE names, --reason or --all, not several")
	case err != nil:
		return err
	}
	who := *by
	if who == "" {
		who = osUser()
	}
	d, err := openQueue(dir)
	if err != nil {
		return err
	}
	defer closeQueue(d, &err)
	contract, err := cf.contract(dir)
	if err != nil {
		return err
	}
	// The ledger is opened before anything moves, so that a replay is never
	// done without the means to record it.
	l, err := openLedgerFor(ctx, d, *db, ledgerOpts{use: writeLedger})
	if err != nil {
		return err
	}
	defer closeLedger(l, &err)

	// One replay at a time per queue: the selection below must not be
	// raced by another replay's moves, and the replays a killed run left
	// unfinished are finished first, so this one sees the queue as they
	// leave it.
	resume, err := beginResume(ctx, e, l)
	if err != nil {
		return err
	}
	unlock, finished, err := replay.Lock(ctx, d, l)
	for _, f := range finished {
		warnFinished(e, f)
		if resume != nil {
			resume.addFinished(f)
		}
	}
	if resume != nil {
		resume.end(ctx, e, &err)
	}
	if err != nil {
		return err
	}
	defer func() {
		if uerr := unlock(); err == nil && uerr != nil {
			err = uerr
		}
	}()
	plan, err := replay.Resolve(ctx, d, l, contract, sel, *force)
	if err != nil {
		return err
	}
	if len(plan.Steps) == 0 {
		// Not a failure: the queue is as the operator wants it. But a typo
		// in --reason must not pass for "all fine", hence the warning.
		if *all {
			e.warn("error/ holds no dead letter: nothing to replay")
		} else if err := checkReason(ctx, d, l, *reason); err != nil {
			return err
		} else {
			e.warn("no dead letter in error/ has reason %q: nothing to replay", *reason)
		}
		return nil
	}
	for _, s := range plan.Steps {
		switch {
		case s.Skip:
			fmt.Fprintf(e.stdout, "skip %s: msg_id %s already processed\n", cell(s.File), cell(s.Key))
		case *dryRun:
			fmt.Fprintf(e.stdout, "would replay %s\n", cell(s.File))
		}
	}
	if *dryRun || len(plan.Files()) == 0 {
		// Nothing changes (a dry run, every file skipped): nothing to
		// audit either.
		return nil
	}
	// Audited before anything moves, with the file set the plan resolved
	// to; then the intent is committed before the first file moves: killed
	// at any instant from here, the next replay, consume or fsck --repair
	// finishes it (package replay).
	rec, err := oneMoveTask(task.Request{Kind: task.Replay,
		Selection: task.Selection{Names: sel.Names, Reason: sel.Reason, All: sel.All}, Note: *note, Force: *force}, who)
	if err != nil {
		return err
	}
	run, err := beginAudit(ctx, e, l, who, auditReplay, replaySelection(sel, plan, *force, *note, *by))
	if err != nil {
		return err
	}
	defer run.end(ctx, e, &err)
	run.Counts["selected"] = int64(len(plan.Steps))
	run.Counts["skipped"] = int64(len(plan.Steps) - len(plan.Files()))
	_, done, err := replay.ExecuteTask(ctx, d, l, plan, rec, who, *note)
	run.Counts["done"] = int64(len(done))
	for _, r := range done {
		fmt.Fprintf(e.stdout, "replayed %s -> inbox/%s\n", cell(r.File), cell(r.NewName))
	}
	if err != nil {
		return fmt.Errorf("%w (the replay is recorded; spool replay %s or spool fsck %s --repair finishes it)", err, dir, dir)
	}
	return nil
}

// replaySelection is the audit's selection of a replay: what was asked
// (names, reason, all, force, note; os_user when --by named someone
// else) and what it resolved to (files, the plan's digest).
func replaySelection(s replay.Selection, p replay.Plan, force bool, note, by string) map[string]any {
	sel := map[string]any{"files": len(p.Steps), "digest": p.Digest()}
	switch {
	case len(s.Names) > 0:
		sel["names"] = s.Names
	case s.Reason != "":
		sel["reason"] = s.Reason
	case s.All:
		sel["all"] = true
	}
	if force {
		sel["force"] = true
	}
	if note != "" {
		sel["note"] = note
	}
	if u := osUser(); by != "" && by != u {
		sel["os_user"] = u
	}
	return sel
}

// oneMoveTask is the task record of a replay or discard run at once, as
// one move, asked for on the command line by who (replay.ExecuteTask,
// discard.RunTask): listed by spool tasks with the others.
func oneMoveTask(req task.Request, who string) (ledger.TaskRecord, error) {
	text, err := json.Marshal(req)
	if err != nil {
		return ledger.TaskRecord{}, fmt.Errorf("encode %s task request: %w", req.Kind, err)
	}
	return ledger.TaskRecord{Request: string(text), By: who, Via: ledger.AuditCLI, Note: req.Note}, nil
}

// warnFinished says on stderr that a replay a killed run left unfinished
// was finished.
func warnFinished(e *env, f replay.Finished) {
	e.warn("finished replay %d by %s, interrupted before: %d of its %d files replayed", f.Intent.ID, f.Intent.By, len(f.Replays), len(f.Intent.Items))
}

// startReports has a consumer's start (queueopen.Start) say on stderr
// what it finished and removed.
func startReports(e *env) queueopen.Options {
	return queueopen.Options{
		OnReplayFinished: func(f replay.Finished) { warnFinished(e, f) },
		OnTempRemoved: func(t queue.Temp) {
			e.warn("removed %s, a temp file a killed writer left (%d bytes)", t.Path(), t.Size)
		},
	}
}

// cell is a name fit for the terminal (report.Terminal).
func cell(s string) string { return report.Terminal(s) }
