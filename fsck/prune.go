package fsck

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// This file holds spool prune: the ledger's rows past the dedup window
// and, with --files, the files of done/ they record. It lives here because
// which file a row records is fsck's question (keys.go), and a prune must
// leave nothing that fsck would call lost.

// Pruned is what Prune removed (or, in a dry run, would remove).
type Pruned struct {
	// Rows counts the ledger rows.
	Rows ledger.Pruned
	// Files counts the files of done/ removed (with files), done-files
	// included, Bytes their sizes.
	Files, Bytes int64
	// Kept counts the files of done/ left without a row (without files):
	// those of the rows removed, and those an earlier prune left; KeptBytes
	// their sizes. A prune with files removes them.
	Kept, KeptBytes int64
}

// Prune removes the ledger rows past the dedup window, as ledger.DB.Prune
// does, and with files, first, the files of done/ that those rows record
// (and the done-files that came into done/ before the window's edge):
// a file goes when a row that the prune removes records it (by inode and
// name, as fsck matches them) and no row that it keeps does. It also
// removes, with files, the files an earlier prune without files left: a
// file of done/ that no row records and that got there before the
// ledger's prune horizon (ledger.Fsck.PruneHorizon). No other file is
// touched: not error/, not a file of done/ the ledger has no record of
// and that is newer than the horizon (fsck's done-unrecorded, the only
// evidence of a lost row), not one a kept row records.
//
// Without files it counts the files it leaves in done/ without their rows
// (Kept), and records with the rows' removal a horizon late enough that
// fsck never calls them lost.
//
// The order is what makes it crash-safe: the files are removed and done/
// is fsynced before the rows are deleted, so a prune killed at any instant
// leaves at most rows whose file is gone, which fsck reports as
// informational (processed-without-file; a redelivery of them is still a
// duplicate), never a file of done/ without its row; the next prune with
// the same window removes those rows. Deleting the rows first would leave,
// after a kill, files of done/ that fsck calls unrecorded and --repair
// records again. The horizon is committed with the rows' removal.
func Prune(ctx context.Context, d *queue.Dir, l *ledger.DB, p ledger.Prune, files bool) (Pruned, error) {
	var res Pruned
	keep, err := readableInodes(ctx, d, p.KeepClaims)
	if err != nil {
		return res, err
	}
	p.KeepInodes = keep
	if files {
		if err := pruneDoneFiles(ctx, d, p, &res); err != nil {
			return res, err
		}
	}
	filesBefore, err := pruneDone(ctx, d, l, p, files, &res)
	if err != nil {
		return res, err
	}
	p.FilesBefore = filesBefore
	n, err := l.Fsck().Prune(ctx, p)
	if err != nil {
		return res, err
	}
	res.Rows = n
	return res, nil
}

// readableInodes returns the inodes of the files a consumer may still
// read from where it stopped, whose batch progress a prune keeps: those
// of inbox/ (a claim given back), error/ (a batch file set aside whole,
// which a replay resumes), held/, and of the claims of processing/. A
// file that moves from one stage to another while they are listed can be
// missed; read again from its start, its records' keys absorb what was
// committed.
func readableInodes(ctx context.Context, d *queue.Dir, claims []string) (map[uint64]bool, error) {
	keep := map[uint64]bool{}
	for _, c := range claims {
		if ino, ok := queue.ClaimInode(c); ok {
			keep[ino] = true
		}
	}
	for _, s := range []queue.Stage{queue.Inbox, queue.Error, queue.Held} {
		err := d.List(s, func(e queue.Entry) error {
			keep[e.Ino] = true
			return ctx.Err()
		})
		if err != nil {
			return nil, err
		}
	}
	return keep, nil
}

// pruneDone goes through done/ once for Prune: with files it removes (in a
// dry run, counts) the files of the rows Prune removes and those an
// earlier prune left, and fsyncs done/; without, it counts them as kept.
// It returns the latest status-change time of a file of a removed row
// that stays, for the prune's horizon.
func pruneDone(ctx context.Context, d *queue.Dir, l *ledger.DB, p ledger.Prune, files bool, res *Pruned) (time.Time, error) {
	var gone, kept []fileKey
	err := l.Fsck().EachPruneFile(ctx, p, func(ino uint64, file string, pruned bool) error {
		if pruned {
			gone = append(gone, recordedKey(ino, file))
		} else {
			kept = append(kept, recordedKey(ino, file))
		}
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	horizon, err := l.Fsck().PruneHorizon(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if !horizon.IsZero() {
		// A row recorded before inodes were cannot be matched to its file:
		// its file would look left by an earlier prune.
		unkeyed, err := l.Fsck().UnkeyedRows(ctx)
		if err != nil {
			return time.Time{}, err
		}
		if unkeyed {
			horizon = time.Time{}
		}
	}
	if len(gone) == 0 && horizon.IsZero() {
		return time.Time{}, nil
	}
	slices.SortFunc(gone, compareKeys)
	slices.SortFunc(kept, compareKeys)
	gone, kept = slices.Compact(gone), slices.Compact(kept)
	var (
		keys        []fileKey
		removed     bool
		filesBefore time.Time
	)
	err = d.List(queue.Done, func(e queue.Entry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.Regular() {
			return nil
		}
		keys = stageKeys(keys[:0], e.Ino, e.Name)
		match := false
		for _, k := range keys {
			if _, ok := slices.BinarySearchFunc(kept, k, compareKeys); ok {
				return nil
			}
			if _, ok := slices.BinarySearchFunc(gone, k, compareKeys); ok {
				match = true
			}
		}
		changed := time.Unix(0, e.ChangeTime)
		if !match && (horizon.IsZero() || !changed.Before(horizon)) {
			return nil // recorded by no row: lost, unless an earlier prune left it
		}
		if files {
			if !p.DryRun {
				ok, err := d.RemoveDone(e.Name, e.Ino)
				if err != nil {
					return err
				}
				if !ok {
					return nil // gone meanwhile, or another file now
				}
				removed = true
			}
			res.Files++
			res.Bytes += e.Size
			return nil
		}
		res.Kept++
		res.KeptBytes += e.Size
		if match && changed.After(filesBefore) {
			filesBefore = changed
		}
		return nil
	})
	if removed {
		// Before the rows go, whatever err is: a removal that a power cut
		// could undo is harmless (the file comes back with its row), but
		// the rows must not be deleted before the removals are durable.
		if serr := d.Sync(queue.Done); serr != nil && err == nil {
			err = fmt.Errorf("prune files: %w", serr)
		}
	}
	return filesBefore, err
}

// pruneDoneFiles removes (in a dry run, counts) the done-files of done/
// moved there before p.Before, for Prune with files, and fsyncs done/. A
// done-file goes into done/ with its batch file, and no ledger row records
// it, so nothing else would ever remove it: it goes at the age at which its
// file's rows go. Removing one is always safe, whenever its file goes:
// nothing reads a done-file once it is in done/, and fsck counts none.
func pruneDoneFiles(ctx context.Context, d *queue.Dir, p ledger.Prune, res *Pruned) error {
	removed := false
	err := d.ListDoneFiles(queue.Done, func(e queue.Entry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.Regular() || !time.Unix(0, e.ChangeTime).Before(p.Before) {
			return nil
		}
		if !p.DryRun {
			ok, err := d.RemoveDone(e.Name, e.Ino)
			if err != nil || !ok {
				return err
			}
			removed = true
		}
		res.Files++
		res.Bytes += e.Size
		return nil
	})
	if removed {
		if serr := d.Sync(queue.Done); serr != nil && err == nil {
			err = fmt.Errorf("prune done-files: %w", serr)
		}
	}
	return err
}
