package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/discard"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/replay"
	"github.com/spoolq/spool/task"
	"golang.org/x/sys/unix"
)

var discardCommand = &command{
	name:    "discard",
	args:    "DIR [FILE...] [--reason R] [--all] [filters] [--rate N] --note TEXT [--dry-run] [--to DIR2] [--by USER] [contract flags] [--db PATH]",
	summary: "remove dead letters from error/ on purpose (delete, or --to DIR2), each recorded in the ledger",
	help: `
Removes dead letters from error/ on purpose, as Postfix's postsuper -d
does, and records each in the ledger: who (the OS user, or --by), when,
why (--note, required), the file's name, its msg_id when known, its
dead-letter reason and the SHA-256 of its body. spool fsck then knows the
file was discarded, not lost, and spool show tells the story.
Select exactly one way, as for spool replay: FILE names, --reason R
(every dead letter whose reason is R, or unknown for files without a
record), or --all.

All or nothing: a name with / or .. (exit 2) or a name not in error/
(exit 1) changes nothing; so does a --reason that no dead letter in
error/ has (exit 2, with the reasons error/ holds now).

--to DIR2 moves the files into DIR2 instead of deleting them, keeping their
bytes (a name DIR2 already holds gets a ~N suffix). DIR2 must exist, be on
the queue's filesystem (a rename elsewhere would not be atomic: move the
files on from DIR2 yourself) and not be inside the queue (exit 2).

The discard is committed to the ledger, with every file it selected,
before the first file goes; one killed at any instant is finished by the
next spool discard or spool fsck --repair, so in the end every selected
file is gone and recorded, or still in error/. Each discard is also an
audit row (action discard), written before the batch and closed after.

--dry-run prints what would be discarded and changes nothing, in the queue
or in the ledger.

The filters and --rate of spool replay, and an approval policy
(discard_over=N: spool policy), make the discard a task run in chunks,
as they do a replay (spool replay --help, spool tasks); without them it
is a task of one move, listed by spool tasks, all or nothing.

Prints one line per file, in the order given (name order for --reason and
--all):
  discarded NAME (sha256 HASH)
  discarded NAME -> DIR2/NEWNAME (sha256 HASH)     (--to)
  would discard NAME (reason R, sha256 HASH)       (--dry-run)`,
}

func init() { discardCommand.run = runDiscard }

func runDiscard(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	reason := flags.String("reason", "", "discard every dead letter with reason `R`")
	all := flags.Bool("all", false, "discard every dead letter in error/")
	dryRun := flags.Bool("dry-run", false, "print what would be discarded; change nothing")
	note := flags.String("note", "", "why, for the ledger (required)")
	to := flags.String("to", "", "move the files into `DIR2` (outside the queue, on its filesystem) instead of deleting them")
	by := flags.String("by", "", "who discards, for the ledger (default: the OS user)")
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
	// Under an approval policy, or with a filter or --rate, the discard
	// is a task run in chunks (package task); otherwise it is one move,
	// all or nothing, recorded as a task of one chunk (discard.RunTask).
	if policy, err := readPolicy(ctx, dir, *db, !*dryRun); err != nil {
		return err
	} else if policy.Set || tf.any() {
		return discardTask(ctx, e, tf, cf, policy, taskRun{dir: dir, db: *db, by: *by, dryRun: *dryRun,
			req: task.Request{Kind: task.Discard, Note: *note, Rate: tf.rate}}, names, *reason, *all, *to, given(flags, "to"))
	}
	sel := replay.Selection{Names: names, Reason: *reason, All: *all}
	switch err := sel.Check(); {
	case errors.Is(err, replay.ErrNoSelection):
		return e.usage("missing FILE (or --reason R, or --all)")
	case errors.Is(err, replay.ErrManySelections):
		return e.usage("give FILE names, --reason or --all, not several")
	case err != nil:
		return err
	}
	if strings.TrimSpace(*note) == "" {
		return e.usage("--note TEXT is required: say why these dead letters go, for the ledger")
	}
	if given(flags, "to") && *to == "" {
		return e.usage("--to is empty")
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
	var target *queue.Target
	if *to != "" {
		abs, err := filepath.Abs(*to)
		if err != nil {
			return err
		}
		// The ledger records the absolute path: a resume may run elsewhere.
		if target, err = d.OpenTarget(abs); err != nil {
			if errors.Is(err, queue.ErrTargetCrossDevice) || errors.Is(err, queue.ErrTargetInQueue) {
				return &usageError{msg: "--to " + err.Error()}
			}
			return &inputError{path: *to, err: err}
		}
		defer func() {
			if cerr := target.Close(); err == nil {
				err = cerr
			}
		}()
	}
	contract, err := cf.contract(dir)
	if err != nil {
		return err
	}
	if *dryRun {
		return dryDiscard(ctx, e, d, *db, contract, sel, target)
	}
	// Refused before the ledger is opened or anything recorded: removing
	// files from error/ needs write access to it.
	if err := unix.Access(d.StagePath(queue.Error), unix.W_OK|unix.X_OK); err != nil {
		return &usageError{msg: fmt.Sprintf("%s: %s may not write it (%v): discarding removes files from error/ and records them in the ledger, which needs write access to both; run it as the queue's owner",
			d.StagePath(queue.Error), osUser(), err)}
	}
	if target != nil {
		if err := unix.Access(target.Path(), unix.W_OK|unix.X_OK); err != nil {
			return &usageError{msg: fmt.Sprintf("--to %s: %s may not write it (%v)", target.Path(), osUser(), err)}
		}
	}
	// The ledger is opened before anything goes, so that a discard is
	// never done without the means to record it.
	l, err := openLedgerFor(ctx, d, *db, ledgerOpts{use: writeLedger})
	if err != nil {
		return err
	}
	defer closeLedger(l, &err)

	// One replay or discard at a time per queue, and those a killed run
	// left unfinished are finished first, so this one sees error/ as they
	// leave it.
	unlock, finished, err := replay.Lock(ctx, d, l)
	for _, f := range finished {
		warnFinished(e, f)
	}
	if err != nil {
		return err
	}
	defer func() {
		if uerr := unlock(); err == nil && uerr != nil {
			err = uerr
		}
	}()
	toPath := ""
	if target != nil {
		toPath = target.Path()
	}
	audit, err := newDiscardAudit(l, who, sel, *note, toPath)
	if err != nil {
		return err
	}
	// The discards a killed run left are finished first, audited as one
	// action of their own.
	pending, err := l.UnfinishedDiscards(ctx)
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		rid, err := audit.beginResume(ctx, pending)
		if err != nil {
			return err
		}
		discarded, err := discard.ResumeLocked(ctx, d, l)
		for _, b := range discarded {
			warnDiscardFinished(e, b)
		}
		if err := audit.endResume(ctx, rid, discarded, err); err != nil {
			return fmt.Errorf("%w (finish it with spool fsck %s --repair once the cause is fixed)", err, dir)
		}
	}
	plan, err := resolveDiscard(ctx, e, d, l, contract, sel)
	if err != nil {
		if refusal(err) {
			return audit.refused(ctx, err)
		}
		return err
	}
	if len(plan.Steps) == 0 {
		return nil
	}
	// The audit row, then the batch, are committed before the first file
	// goes: killed at any instant from here, the next discard or fsck
	// --repair finishes it.
	rec, err := oneMoveTask(task.Request{Kind: task.Discard,
		Selection: task.Selection{Names: sel.Names, Reason: sel.Reason, All: sel.All}, Note: *note, To: toPath}, who)
	if err != nil {
		return err
	}
	aid, err := audit.begin(ctx)
	if err != nil {
		return err
	}
	_, b, err := discard.RunTask(ctx, d, l, plan, rec, who, *note, target)
	printDiscards(e, b)
	if err != nil && b.ID != 0 {
		err = fmt.Errorf("%w (the discard is recorded; spool discard or spool fsck %s --repair finishes it)", err, dir)
	}
	return audit.end(ctx, aid, len(plan.Steps), b, err)
}

// refusal reports whether err refuses a discard before anything changed:
// a usage error, or a name not in error/ or path-like.
func refusal(err error) bool {
	var usage *usageError
	return errors.As(err, &usage) || errors.Is(err, queue.ErrNotInError) || errors.Is(err, queue.ErrPathLike)
}

// resolveDiscard resolves sel into a plan (replay.Resolve), and refuses a
// --reason that selects nothing: discarding is for a reason seen in
// error/, and a typo must not pass for "nothing to discard". An empty
// --all is only a warning.
func resolveDiscard(ctx context.Context, e *env, d *queue.Dir, l *ledger.DB, c spool.Contract, sel replay.Selection) (replay.Plan, error) {
	plan, err := replay.Resolve(ctx, d, l, c, sel, true)
	if err != nil {
		return plan, err
	}
	if len(plan.Steps) > 0 {
		return plan, nil
	}
	if sel.All {
		e.warn("error/ holds no dead letter: nothing to discard")
		return plan, nil
	}
	return plan, noSuchReason(ctx, d, l, sel.Reason)
}

// dryDiscard prints what a discard of sel would remove, reading the ledger
// without writing it and taking no lock: it changes nothing.
func dryDiscard(ctx context.Context, e *env, d *queue.Dir, db string, c spool.Contract, sel replay.Selection, target *queue.Target) (err error) {
	l, err := openLedgerFor(ctx, d, db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer closeLedger(l, &err)
	plan, err := resolveDiscard(ctx, e, d, l, c, sel)
	if err != nil {
		return err
	}
	where := ""
	if target != nil {
		where = ", to " + cell(target.Path())
	}
	for _, s := range plan.Steps {
		hash, _, err := d.HashFile(queue.Error, s.File, s.Ino)
		if err != nil {
			return err
		}
		if hash == "" {
			hash = "none: not a regular file"
		}
		fmt.Fprintf(e.stdout, "would discard %s (reason %s, sha256 %s%s)\n", cell(s.File), cell(s.Reason), hash, where)
	}
	return nil
}

// printDiscards prints one line per file of a batch.
func printDiscards(e *env, b ledger.DiscardBatch) {
	for _, it := range b.Items {
		hash := it.ContentHash
		if hash == "" {
			hash = "none: not a regular file"
		}
		switch it.Outcome {
		case ledger.DiscardDeleted:
			fmt.Fprintf(e.stdout, "discarded %s (sha256 %s)\n", cell(it.File), hash)
		case ledger.DiscardMoved:
			fmt.Fprintf(e.stdout, "discarded %s -> %s/%s (sha256 %s)\n", cell(it.File), cell(b.ToDir), cell(it.NewName), hash)
		case ledger.DiscardMissing:
			e.warn("skip %s: gone from error/ before the discard reached it", cell(it.File))
		}
	}
}

// warnDiscardFinished says on stderr that a discard a killed run left
// unfinished was finished.
func warnDiscardFinished(e *env, b ledger.DiscardBatch) {
	n := 0
	for _, it := range b.Items {
		if it.Outcome != ledger.DiscardMissing {
			n++
		}
	}
	e.warn("finished discard %d by %s, interrupted before: %d of its %d files discarded", b.ID, b.By, n, len(b.Items))
}

// discardTask runs a discard as a durable task (runAsTask), with its
// --note, --to and selection checked as a discard's.
func discardTask(ctx context.Context, e *env, tf *taskFlags, cf *contractFlags, p task.Policy, r taskRun, names []string, reason string, all bool, to string, toGiven bool) error {
	sel, err := tf.selection(e, names, reason, all)
	if err != nil {
		return err
	}
	if strings.TrimSpace(r.req.Note) == "" {
		return e.usage("--note TEXT is required: say why these dead letters go, for the ledger")
	}
	if toGiven && to == "" {
		return e.usage("--to is empty")
	}
	if to != "" {
		if r.req.To, err = filepath.Abs(to); err != nil {
			return err
		}
	}
	r.req.Selection, r.policy = sel, p
	if r.contract, err = cf.contract(r.dir); err != nil {
		return err
	}
	return runAsTask(ctx, e, r)
}
