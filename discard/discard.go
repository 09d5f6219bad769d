// Package discard removes dead letters from error/ on purpose (spool
// discard), deleting them or moving them to a directory outside the queue,
// so that a discard killed at any instant is finished by the next run: in
// the end every file it selected is gone from error/ with its discard
// recorded in the ledger (who, when, why, the body's hash), or still in
// error/. fsck and show read those records, so a discarded file is known
// as discarded, not lost.
//
// A discard goes in four durable steps (docs/DESIGN.md, "Discard"):
//
//  1. the batch, with every selected file's name, inode, msg_id, reason
//     and content hash, is committed to the ledger (state pending) before
//     anything is done to a file;
//  2. each file is renamed within error/ to a hidden staging name of its
//     own (queue.DiscardName), error/ is synced, then the batch is marked
//     staged (with the files found gone meanwhile marked missing);
//  3. each staged file is unlinked, or moved to the --to directory, and
//     the directories are synced;
//  4. the batch is marked done, with each file's outcome.
//
// Killed before step 1 commits, nothing changed. Killed in step 2, the
// files not yet staged are still under their names, with the inodes the
// batch recorded, and the others under their staging names: all still in
// error/, and the batch pending. Killed in step 3, the files still staged
// are the ones not yet removed, and a file gone from its staging name was
// removed. Resume finishes every unfinished batch from there, forward:
// the operator asked for these files to go, and the batch is the record
// of that.
//
// Step 1 is package task's, the one runner of replays and discards: it
// resolves the selection with package replay, hashes each file, commits
// the batch as a chunk of a task (ledger.Tasks.Start, Tasks.BeginChunk)
// and then calls Finish, which does steps 2 to 4, under the same lock as a
// replay (queue.Dir.LockReplays), so the two never race over error/.
// Resume runs Finish on every batch a killed run left unfinished.
package discard

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// Resume finishes every discard left unfinished by a run that was killed
// or failed, and returns the batches it finished. It takes the queue's
// replay lock for the time it runs.
func Resume(ctx context.Context, d *queue.Dir, l *ledger.DB) (_ []ledger.DiscardBatch, err error) {
	unlock, err := d.LockReplays(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if uerr := unlock(); err == nil && uerr != nil {
			err = fmt.Errorf("resume discards: unlock: %w", uerr)
		}
	}()
	return ResumeLocked(ctx, d, l)
}

// ResumeLocked is Resume for a caller that holds the replay lock. A batch
// that moves its files needs its directory: one that is gone or no longer
// fit (queue.Dir.OpenTarget) fails the resume, and the batch stays
// unfinished, its files staged in error/.
func ResumeLocked(ctx context.Context, d *queue.Dir, l *ledger.DB) ([]ledger.DiscardBatch, error) {
	batches, err := l.Discards().Unfinished(ctx)
	if err != nil {
		return nil, fmt.Errorf("resume discards: %w", err)
	}
	var out []ledger.DiscardBatch
	for _, b := range batches {
		var to *queue.Target
		if b.ToDir != "" {
			if to, err = d.OpenTarget(b.ToDir); err != nil {
				return out, fmt.Errorf("resume discard %d: %w", b.ID, err)
			}
		}
		fin, err := Finish(ctx, d, l, b, to)
		if to != nil {
			if cerr := to.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return out, fmt.Errorf("resume discard %d: %w", b.ID, err)
		}
		out = append(out, fin)
	}
	return out, nil
}

// Finish takes batch b from the state it is in to done (steps 2 to 4),
// deleting its files or moving them to to when b has a ToDir (to is then
// that directory, opened by queue.Dir.OpenTarget), and returns it with
// each item's outcome. The caller holds the queue's replay lock. If it
// fails, the batch stays unfinished for Resume.
func Finish(ctx context.Context, d *queue.Dir, l *ledger.DB, b ledger.DiscardBatch, to *queue.Target) (ledger.DiscardBatch, error) {
	if b.State == ledger.IntentPending {
		var missing []int
		for i, it := range b.Items {
			staged, err := d.StageDiscard(b.ID, it.Idx, it.File, it.Ino)
			if err != nil {
				return b, err
			}
			if !staged {
				missing = append(missing, it.Idx)
				b.Items[i].Outcome = ledger.DiscardMissing
			}
		}
		// Durable before the batch says so: a staging rename lost to a
		// power cut would otherwise pass for a file already removed.
		if err := d.Sync(queue.Error); err != nil {
			return b, err
		}
		if err := l.Discards().Stage(ctx, b.ID, missing); err != nil {
			return b, err
		}
		b.State = ledger.IntentStaged
	}
	for i, it := range b.Items {
		if it.Outcome == ledger.DiscardMissing {
			continue
		}
		if to == nil {
			// Gone from its staging name: removed by the run that was
			// killed, which had staged it.
			if _, err := d.DropStaged(b.ID, it.Idx); err != nil {
				return b, err
			}
			if err := d.DiscardDoneFile(it.File, nil); err != nil {
				return b, err
			}
			b.Items[i].Outcome = ledger.DiscardDeleted
			continue
		}
		name, moved, err := d.MoveStaged(b.ID, it.Idx, it.File, to)
		if err != nil {
			return b, err
		}
		if !moved && it.Ino != 0 {
			// Moved by the run that was killed: the name it got there is
			// found by its inode, if it is still there.
			if name, _, err = to.Locate(it.Ino); err != nil {
				return b, err
			}
		}
		if err := d.DiscardDoneFile(it.File, to); err != nil {
			return b, err
		}
		b.Items[i].Outcome, b.Items[i].NewName = ledger.DiscardMoved, name
	}
	if err := d.Sync(queue.Error); err != nil {
		return b, err
	}
	if to != nil {
		if err := to.Sync(); err != nil {
			return b, err
		}
	}
	now := time.Now()
	if err := l.Discards().Finish(ctx, b.ID, b.Items, now); err != nil {
		return b, err
	}
	b.State, b.Finished = ledger.IntentDone, now
	return b, nil
}
