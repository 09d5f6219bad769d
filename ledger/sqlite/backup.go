package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spoolq/spool/ledger"
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
		return fmt.Errorf("backup target: %w", err)
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
