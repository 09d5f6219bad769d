package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/task"
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
bytes (a name DIR2 already holds gets a ~N suffix). DIR2 must exist, be a
directory on the queue's filesystem (a rename elsewhere would not be
atomic: move the files on from DIR2 yourself), not be inside the queue,
be closed to other users (the files keep their own modes, often
readable by all: chmod o-rwx DIR2) and writable; anything else is refused
before anything is recorded (exit 2).

In a queue of batch files with done_file, a file that could not be read
at all is in error/ with its done-file: the done-file goes with it
(deleted, or moved to DIR2).

The discard is committed to the ledger, with every file it selected,
before the first file goes; one killed at any instant is finished by the
next spool discard, spool replay or spool fsck --repair, so in the end
every selected file is gone and recorded, or still in error/. Each
discard is also an audit row (action discard), written with the batch
and closed after.

--dry-run prints what would be discarded and changes nothing, in the queue
or in the ledger.

The filters and --rate of spool replay, and the queue's approval policy
(discard_over=N: spool policy), work as they do for a replay: every
discard is a task (spool replay --help, spool tasks), all or nothing
without --rate.

Prints one line per file, in the order given (name order for --reason and
--all):
  discarded NAME (sha256 HASH)
  discarded NAME -> DIR2/NEWNAME (sha256 HASH)     (--to)
  would discard NAME (reason R, sha256 HASH)       (--dry-run)`,
	opts: newOpts[discardOpts],
}

// discardOpts are spool discard's.
type discardOpts struct {
	deadOpts
	to  *string
	req task.Request
}

func (o *discardOpts) flags(fs *flag.FlagSet) {
	o.bind(fs, "discard")
	o.note = fs.String("note", "", "why, for the ledger (required)")
	o.to = fs.String("to", "", "move the files into `DIR2` (outside the queue, on its filesystem, closed to other users) instead of deleting them")
	o.by = fs.String("by", "", "who discards, for the ledger (default: the OS user)")
}

func (o *discardOpts) validate(e *env, pos []string) (err error) {
	if err := o.deadOpts.validate(e, pos); err != nil {
		return err
	}
	if strings.TrimSpace(*o.note) == "" {
		return e.usage("--note TEXT is required: say why these dead letters go, for the ledger")
	}
	o.req = task.Request{Kind: task.Discard, Selection: o.sel, Note: *o.note, Rate: o.tf.rate, By: *o.by}
	if e.given("to") {
		if *o.to == "" {
			return e.usage("--to is empty")
		}
		// The ledger records the absolute path: a resume may run elsewhere.
		if o.req.To, err = filepath.Abs(*o.to); err != nil {
			return err
		}
	}
	return nil
}

func (o *discardOpts) run(ctx context.Context, e *env) error { return o.ask(ctx, e, o.req) }

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
