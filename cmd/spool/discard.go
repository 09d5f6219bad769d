package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/task"
)

var discardCommand = &cmdline.Command{
	Name:    "discard",
	Args:    "DIR [FILE...] [--reason R] [--all] [filters] [--rate N] --note TEXT [--dry-run] [--to DIR2] [--by USER] [contract flags] [--db PATH]",
	Summary: "remove dead letters from error/ on purpose (delete, or --to DIR2), each recorded in the ledger",
	Options: cmdline.New[discardOpts],
}

// discardOpts are spool discard's.
type discardOpts struct {
	deadOpts
	to  *string
	req task.Request
}

func (o *discardOpts) Flags(fs *flag.FlagSet) {
	o.bind(fs, "discard")
	o.note = fs.String("note", "", "why, for the ledger (required)")
	o.to = fs.String("to", "", "move the files into `DIR2` (outside the queue, on its filesystem, closed to other users) instead of deleting them")
	o.by = fs.String("by", "", "who discards, for the ledger (default: the OS user)")
}

func (o *discardOpts) Validate(e *env, pos []string) (err error) {
	if err := o.deadOpts.Validate(e, pos); err != nil {
		return err
	}
	if strings.TrimSpace(*o.note) == "" {
		return e.Usage("--note TEXT is required: say why these dead letters go, for the ledger")
	}
	o.req = task.Request{Kind: task.Discard, Selection: o.sel, Note: *o.note, Rate: o.tf.rate, By: *o.by}
	if e.Given("to") {
		if *o.to == "" {
			return e.Usage("--to is empty")
		}
		// The ledger records the absolute path: a resume may run elsewhere.
		if o.req.To, err = filepath.Abs(*o.to); err != nil {
			return err
		}
	}
	return nil
}

func (o *discardOpts) Run(ctx context.Context, e *env) error { return o.ask(ctx, e, o.req) }

// printDiscards prints one line per file of a batch.
func printDiscards(e *env, b ledger.DiscardBatch) {
	for _, it := range b.Items {
		hash := it.ContentHash
		if hash == "" {
			hash = "none: not a regular file"
		}
		switch it.Outcome {
		case ledger.DiscardDeleted:
			fmt.Fprintf(e.Stdout, "discarded %s (sha256 %s)\n", cell(it.File), hash)
		case ledger.DiscardMoved:
			fmt.Fprintf(e.Stdout, "discarded %s -> %s/%s (sha256 %s)\n", cell(it.File), cell(b.ToDir), cell(it.NewName), hash)
		case ledger.DiscardMissing:
			e.Warn("skip %s: gone from error/ before the discard reached it", cell(it.File))
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
	e.Warn("finished discard %d by %s, interrupted before: %d of its %d files discarded", b.ID, b.By, n, len(b.Items))
}
