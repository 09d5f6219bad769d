package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/sqlite"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/report"
	"github.com/spoolq/spool/task"
)

var backupCommand = &command{
	name:    "backup",
	args:    "DIR --to FILE [--force] [--json] [--db PATH]",
	summary: "copy the SQLite ledger into FILE while consumers run, crash-safely, and check the copy",
	help: `
Copies the queue's SQLite ledger into FILE: one consistent snapshot of it
(SQLite's VACUUM INTO), taken while consumers go on recording. The copy is
written to a hidden temp file beside FILE (.NAME.tmp-RANDOM, mode 0600: the
ledger holds the messages' bodies), fsynced, then checked: opened as a
ledger, PRAGMA integrity_check, and bound to this queue's identity. Only
then is it renamed to FILE and the directory fsynced, so FILE is a whole,
checked copy or does not exist. A backup killed before the rename leaves
only its temp file, which the next backup to FILE removes.

FILE must not exist (--force replaces it; never the live ledger or one of
its -wal, -shm or -turn files, which are refused, exit 2). Keep it on
another disk or host than the queue (see docs/OPERATIONS.md, "Backup and
restore": restoring it, then spool fsck --repair, records what came after).

A PostgreSQL or MariaDB ledger is not copied: exit 2, saying to use the
server's tool (pg_dump, mariadb-dump).

Prints: backed up LEDGER to FILE: N bytes, processed=P deliveries=D
replays=R, queue ID, integrity ok. --json prints one object: ledger, file,
bytes, queue_id, processed, deliveries, replays, integrity.`,
	opts: newOpts[backupOpts],
}

// backupOpts are spool backup's.
type backupOpts struct {
	dirOpts
	to            *string
	force, asJSON *bool
}

func (o *backupOpts) flags(fs *flag.FlagSet) {
	o.to = fs.String("to", "", "write the copy to `FILE`; required, and refused when FILE exists unless --force")
	o.force = fs.Bool("force", false, "replace FILE when it exists (never the live ledger)")
	o.asJSON = fs.Bool("json", false, "one JSON object (see above)")
	o.dirOpts.flags(fs)
}

func (o *backupOpts) validate(e *env, pos []string) error {
	if err := o.dirOpts.validate(e, pos); err != nil {
		return err
	}
	if *o.to == "" {
		return e.usage("missing --to FILE: where to write the copy")
	}
	return nil
}

func (o *backupOpts) run(ctx context.Context, e *env) (err error) {
	dir, db, to, force, asJSON := o.dir, o.db, o.to, o.force, o.asJSON
	_, l, done, err := openBound(ctx, dir, *db, ledgerOpts{use: readLedger})
	if err != nil {
		return err
	}
	defer done(&err)
	live, _ := queueopen.SQLiteFile(dir, *db)
	b, err := sqlite.PrepareBackup(ctx, l, live, *to, *force, func(n string) {
		e.warn("removed %s, left beside %s by a backup that was killed", report.Shown(n), *to)
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
		return e.output("", func(w io.Writer) error { return report.WriteJSON(w, out) })
	}
	fmt.Fprintf(e.stdout, "backed up %s to %s: %d bytes, processed=%d deliveries=%d replays=%d, queue %s, integrity ok\n",
		live, *to, out.Bytes, out.Processed, out.Deliveries, out.Replays, out.QueueID)
	return nil
}
