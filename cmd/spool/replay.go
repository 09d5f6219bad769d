package main

import (
	"context"

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
--msg-id ID, --order-no K.

Every replay is a task (spool tasks): recorded with the exact files it
selected, and run at once, or, over the queue's approval policy
(replay_over=N: spool policy), left waiting: it prints the task's id,
count and digest and moves nothing until spool approve by another
operator (under a policy --by may only name the OS user: exit 2).
Without --rate the files move as one, all or nothing, which spool cancel
cannot stop once begun. --rate N (files a second) moves them in chunks a
kill -9 cannot split (spool resume goes on) and spool cancel can stop
between, without losing a file. With a filter or --rate the task's id is
printed before its files and its end after them.

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
	sel, err := tf.selection(e, pos[1:], *reason, given(flags, "reason"), *all)
	if err != nil {
		return err
	}
	return askTask(ctx, e, cf, taskRun{dir: pos[0], db: *db, dryRun: *dryRun, plain: !tf.any(),
		req: task.Request{Kind: task.Replay, Selection: sel, Note: *note, Force: *force, Rate: tf.rate, By: *by}})
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
