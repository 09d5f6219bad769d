package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// TargetError refuses the file a backup of the ledger file Live would be
// written to: the live ledger itself or one of its side files (whatever
// force says: the copy would destroy what it copies), something that is
// not a regular file, or a file that exists when not told to replace it.
type TargetError struct {
	// Path is the target; Why says what is wrong with it, as the end of
	// a sentence that begins with Path.
	Path, Why string
}

func (e *TargetError) Error() string { return e.Path + " " + e.Why }

// ErrBackupTarget is wrapped by CheckBackupTarget's error when the
// target cannot even be looked at (its stat fails): the target's fault,
// which the face words as its own ("--to FILE: ...").
var ErrBackupTarget = errors.New("backup target")

// sideFiles are the files beside an SQLite ledger that belong to it.
var sideFiles = []string{"", "-wal", "-shm", "-turn"}

// CheckBackupTarget returns a *TargetError when the file at to cannot
// receive a backup of the ledger file live: it is live or one of its side
// files, it exists and is not a regular file, or it exists and force is
// false. A target that does not exist passes.
func CheckBackupTarget(to, live string, force bool) error {
	fi, err := os.Stat(to)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBackupTarget, err)
	}
	for _, side := range sideFiles {
		if li, err := os.Stat(live + side); err == nil && os.SameFile(fi, li) {
			what := "is the live ledger"
			if side != "" {
				what = "is the live ledger's " + strings.TrimPrefix(side, "-") + " file"
			}
			return &TargetError{Path: to, Why: fmt.Sprintf("%s (%s): a backup goes to another file, best on another disk", what, live+side)}
		}
	}
	if !fi.Mode().IsRegular() {
		return &TargetError{Path: to, Why: "exists and is not a regular file"}
	}
	if !force {
		return &TargetError{Path: to, Why: "exists: give a new name (a dated one), or --force to replace it"}
	}
	return nil
}

// VerifyCopy opens the copy of a ledger at path, read-only, and checks
// that it is sound (Backup.CheckIntegrity) and bound to the queue qid; it returns
// its rows. A backup is trusted only once its copy passes.
func VerifyCopy(ctx context.Context, path, qid string) (rows ledger.Rows, err error) {
	c, err := ledger.Open(ctx, ledger.FileScheme+":"+path, ledger.OpenOptions{ReadOnly: true, MustExist: true})
	if err != nil {
		return ledger.Rows{}, fmt.Errorf("check the copy: %w", err)
	}
	defer func() {
		if cerr := c.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("check the copy: close: %w", cerr)
		}
	}()
	if err := c.Backup().CheckIntegrity(ctx); err != nil {
		return ledger.Rows{}, fmt.Errorf("check the copy: %w", err)
	}
	id, err := c.QueueID(ctx)
	if err != nil {
		return ledger.Rows{}, fmt.Errorf("check the copy: %w", err)
	}
	if id != qid {
		return ledger.Rows{}, fmt.Errorf("check the copy: it is bound to queue %q, the live ledger to %q", id, qid)
	}
	if rows, err = c.Backup().CountRows(ctx); err != nil {
		return ledger.Rows{}, fmt.Errorf("check the copy: %w", err)
	}
	return rows, nil
}

// BackupReport is what a Backup wrote: the live ledger's file, the copy,
// its size, the queue it is bound to and its rows, as spool backup
// --json prints it.
type BackupReport struct {
	Ledger     string `json:"ledger"`
	File       string `json:"file"`
	Bytes      int64  `json:"bytes"`
	QueueID    string `json:"queue_id"`
	Processed  int64  `json:"processed"`
	Deliveries int64  `json:"deliveries"`
	Replays    int64  `json:"replays"`
	Integrity  string `json:"integrity"`
}

// A BackupRun copies a ledger file into another while consumers go on
// recording: PrepareBackup checks, Copy copies. Between the two a caller
// records that it begins (an audit row), once nothing can refuse it.
type BackupRun struct {
	l             *ledger.DB
	live, to, qid string
	force         bool
}

// PrepareBackup checks that the ledger l, whose SQLite file is live, can
// be copied into to (l.Backup().CanSnapshot: a *ledger.NoSnapshotError
// for a server's ledger; CheckBackupTarget: a *TargetError), reads the
// queue it is bound to, and removes the temp files a backup to the same
// file killed before its rename left, telling removed of each (also when
// the removal then fails). Nothing is written yet. A target that cannot
// be looked at is an error wrapping ErrBackupTarget.
func PrepareBackup(ctx context.Context, l *ledger.DB, live, to string, force bool, removed func(name string)) (*BackupRun, error) {
	if err := l.Backup().CanSnapshot(); err != nil {
		return nil, err
	}
	if err := CheckBackupTarget(to, live, force); err != nil {
		return nil, err
	}
	qid, err := l.QueueID(ctx)
	if err != nil {
		return nil, err
	}
	names, err := queue.RemoveStaleTempsBeside(to)
	for _, n := range names {
		removed(n)
	}
	if err != nil {
		return nil, err
	}
	return &BackupRun{l: l, live: live, to: to, qid: qid, force: force}, nil
}

// Copy takes one consistent snapshot of the ledger (VACUUM INTO) into a
// temp file beside the target, fsyncs it, checks it (VerifyCopy), and only
// then renames it to the target and fsyncs the directory
// (queue.CreateFile): the target is a whole, checked copy or does not
// exist. The report is filled as far as the copy got.
func (b *BackupRun) Copy(ctx context.Context) (BackupReport, error) {
	var out BackupReport
	err := queue.CreateFile(b.to, b.force, func(tmp string) error {
		if err := b.l.Backup().SnapshotInto(ctx, tmp); err != nil {
			return err
		}
		rows, err := VerifyCopy(ctx, tmp, b.qid)
		if err != nil {
			return err
		}
		out = BackupReport{Ledger: b.live, File: b.to, QueueID: b.qid, Processed: rows.Processed,
			Deliveries: rows.Deliveries, Replays: rows.Replays, Integrity: "ok"}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("back up %s: %w", b.live, err)
	}
	fi, err := os.Stat(b.to)
	if err != nil {
		return out, fmt.Errorf("back up %s: %w", b.live, err)
	}
	out.Bytes = fi.Size()
	return out, nil
}
