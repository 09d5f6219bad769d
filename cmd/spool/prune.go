package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/spoolq/spool/fsck"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
)

var pruneCommand = &cmdline.Command{
	Name:    "prune",
	Args:    "DIR --older-than DURATION [--files] [--dry-run] [--db PATH]",
	Summary: "remove ledger rows past the dedup window (a later redelivery is processed again)",
	Options: cmdline.New[pruneOpts],
}

// pruneOpts are spool prune's.
type pruneOpts struct {
	dirOpts
	olderThan     *string
	dryRun, files *bool
	window        time.Duration
}

func (o *pruneOpts) Flags(fs *flag.FlagSet) {
	o.olderThan = fs.String("older-than", "", "the dedup window: remove rows older than `DURATION` (e.g. 30d, 36h); required")
	o.dryRun = fs.Bool("dry-run", false, "count what would be removed; remove nothing")
	o.files = fs.Bool("files", false, "also remove the files of done/ that the pruned rows record (never error/, never a file without a record)")
	o.dirOpts.Flags(fs)
}

func (o *pruneOpts) Validate(e *env, pos []string) (err error) {
	if err := o.dirOpts.Validate(e, pos); err != nil {
		return err
	}
	if *o.olderThan == "" {
		return e.Usage("missing --older-than DURATION: prune removes nothing without an explicit window")
	}
	if o.window, err = queueopen.ParseWindow(*o.olderThan); err != nil {
		return e.Usage("--older-than: %v", err)
	}
	return nil
}

func (o *pruneOpts) Run(ctx context.Context, e *env) error {
	verb := "pruned"
	if *o.dryRun {
		verb = "would prune"
	}
	_, _, err := queueopen.Prune(ctx, o.dir, queueopen.Options{DB: *o.db}, queueopen.PruneOptions{
		OlderThan: *o.olderThan, Window: o.window, Files: *o.files, DryRun: *o.dryRun, Audited: cliAudited(e),
		OnPruned: func(n fsck.Pruned, before time.Time) {
			printPruned(e, verb, before, n, *o.files, pruneCommandLine(o.dir, *o.db, *o.olderThan))
		},
	})
	if err != nil {
		return ledgerFailure(err, o.dir, *o.db)
	}
	return nil
}

// printPruned prints prune's line, and without files, what it leaves in
// done/ and how to remove it.
func printPruned(e *env, verb string, before time.Time, n fsck.Pruned, files bool, again string) {
	fmt.Fprintf(e.Stdout, "%s %d rows older than %s: processed=%d deliveries=%d",
		verb, n.Rows.Total(), before.UTC().Format(time.RFC3339), n.Rows.Processed, n.Rows.Deliveries)
	if files {
		fmt.Fprintf(e.Stdout, " files=%d bytes=%d", n.Files, n.Bytes)
	}
	if n.Rows.Outbox > 0 {
		fmt.Fprintf(e.Stdout, " outbox=%d", n.Rows.Outbox)
	}
	if n.Rows.BatchFiles > 0 {
		fmt.Fprintf(e.Stdout, " batch-files=%d", n.Rows.BatchFiles)
	}
	fmt.Fprintln(e.Stdout)
	if !files && n.Kept > 0 {
		kept := "kept"
		if verb != "pruned" {
			kept = "would keep"
		}
		fmt.Fprintf(e.Stdout, "%s %d files in done/ (%d bytes) without their rows: %s --files removes them\n",
			kept, n.Kept, n.KeptBytes, cell(again))
	}
}

// pruneCommandLine is the spool prune command line for the queue at dir with
// --db db and the window olderThan, its arguments quoted for a shell.
func pruneCommandLine(dir, db, olderThan string) string {
	c := "spool prune " + queueopen.ShellWord(dir) + " --older-than " + queueopen.ShellWord(olderThan)
	if db != "" {
		c += " --db " + queueopen.ShellWord(db)
	}
	return c
}
