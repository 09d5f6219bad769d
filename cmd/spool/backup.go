package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/report"
	"github.com/spoolq/spool/task"
)

var backupCommand = &cmdline.Command{
	Name:    "backup",
	Args:    "DIR --to FILE [--force] [--json] [--db PATH]",
	Summary: "copy the SQLite ledger into FILE while consumers run, crash-safely, and check the copy",
	Options: cmdline.New[backupOpts],
}

// backupOpts are spool backup's.
type backupOpts struct {
	dirOpts
	to            *string
	force, asJSON *bool
}

func (o *backupOpts) Flags(fs *flag.FlagSet) {
	o.to = fs.String("to", "", "write the copy to `FILE`; required, and refused when FILE exists unless --force")
	o.force = fs.Bool("force", false, "replace FILE when it exists (never the live ledger)")
	o.asJSON = fs.Bool("json", false, "one JSON object (see above)")
	o.dirOpts.Flags(fs)
}

func (o *backupOpts) Validate(e *env, pos []string) error {
	if err := o.dirOpts.Validate(e, pos); err != nil {
		return err
	}
	if *o.to == "" {
		return e.Usage("missing --to FILE: where to write the copy")
	}
	return nil
}

func (o *backupOpts) Run(ctx context.Context, e *env) (err error) {
	dir, db, to, force, asJSON := o.dir, o.db, o.to, o.force, o.asJSON
	_, l, done, err := openBound(ctx, dir, *db, ledgerOpts{use: readLedger})
	if err != nil {
		return err
	}
	defer done(&err)
	live, _ := queueopen.SQLiteFile(dir, *db)
	b, err := sqlite.PrepareBackup(ctx, l, live, *to, *force, func(n string) {
		e.Warn("removed %s, left beside %s by a backup that was killed", report.Shown(n), *to)
	})
	var (
		nse *ledger.NoSnapshotError
		te  *sqlite.TargetError
	)
	switch {
	case errors.As(err, &nse):
		return queueopen.Refuse(err, "%v: back it up with %s (or the server's own backups); spool backup copies SQLite ledgers", err, nse.Tool)
	case errors.As(err, &te):
		return queueopen.Refuse(nil, "--to %v", err)
	case errors.Is(err, sqlite.ErrBackupTarget):
		return fmt.Errorf("--to %s: %w", *to, err)
	case err != nil:
		return err
	}
	var out sqlite.BackupReport
	err = queueopen.RunAudited(ctx, l, cliAudited(e), auditBackup, map[string]any{"to": *to, "force": *force}, func(run *task.Action) error {
		var err error
		out, err = b.Copy(ctx)
		run.Counts["processed"], run.Counts["deliveries"] = out.Processed, out.Deliveries
		run.Counts["replays"], run.Counts["bytes"] = out.Replays, out.Bytes
		return err
	})
	if err != nil {
		return err
	}
	if *asJSON {
		return output(e, "", func(w io.Writer) error { return report.WriteJSON(w, out) })
	}
	fmt.Fprintf(e.Stdout, "backed up %s to %s: %d bytes, processed=%d deliveries=%d replays=%d, queue %s, integrity ok\n",
		live, *to, out.Bytes, out.Processed, out.Deliveries, out.Replays, out.QueueID)
	return nil
}
