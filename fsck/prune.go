package fsck

import (
	"context"
	"fmt"
	"slices"

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
	// Files counts the files of done/ (with files), Bytes their sizes.
	Files, Bytes int64
}

// Prune removes the ledger rows past the dedup window, as ledger.DB.Prune
// does, and with files, first, the files of done/ that those rows record:
// a file goes when a row that the prune removes records it (by inode and
// name, as fsck matches them) and no row that it keeps does. No other file
// is touched: not error/, not a file of done/ the ledger has no record of
// (fsck's done-unrecorded, the only evidence of a lost row), not one a
// kept row records.
//
// The order is what makes it crash-safe: the files are removed and done/
// is fsynced before the rows are deleted, so a prune killed at any instant
// leaves at most rows whose file is gone, which fsck reports as
// informational (processed-without-file; a redelivery of them is still a
// duplicate), never a file of done/ without its row; the next prune with
// the same window removes those rows. Deleting the rows first would leave,
// after a kill, files of done/ that fsck calls unrecorded and --repair
// records again.
func Prune(ctx context.Context, d *queue.Dir, l *ledger.DB, p ledger.Prune, files bool) (Pruned, error) {
	var res Pruned
	if files {
		if err := pruneFiles(ctx, d, l, p, &res); err != nil {
			return res, err
		}
	}
	n, err := l.Prune(ctx, p)
	if err != nil {
		return res, err
	}
	res.Rows = n
	return res, nil
}

// pruneFiles removes (in a dry run, counts) the files of done/ that the
// rows Prune removes record, and fsyncs done/.
func pruneFiles(ctx context.Context, d *queue.Dir, l *ledger.DB, p ledger.Prune, res *Pruned) error {
	var gone, kept []fileKey
	err := l.EachPruneFile(ctx, p, func(ino uint64, file string, pruned bool) error {
		if pruned {
			gone = append(gone, recordedKey(ino, file))
		} else {
			kept = append(kept, recordedKey(ino, file))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(gone) == 0 {
		return nil
	}
	slices.SortFunc(gone, compareKeys)
	slices.SortFunc(kept, compareKeys)
	gone, kept = slices.Compact(gone), slices.Compact(kept)
	var (
		keys    []fileKey
		removed bool
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
		if !match {
			return nil
		}
		if !p.DryRun {
			ok, err := d.RemoveDone(e.Name, e.Ino)
			if err != nil {
				return err
			}
			if !ok {
				return nil
			}
			removed = true
		}
		res.Files++
		res.Bytes += e.Size
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
	return err
}
