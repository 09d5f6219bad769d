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
// Selection and planning are package replay's (replay.Selection,
// replay.Resolve); a discard holds the same lock as a replay
// (queue.Dir.LockReplays), so the two never race over error/.
package discard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/replay"
)

// ErrGone is wrapped by Run for a selected file that left error/, or was
// replaced, between the plan and the discard: nothing is recorded.
var ErrGone = errors.New("gone from error/ since it was selected")

// Run discards the files of p: it hashes each, commits the batch, then
// removes them (deletes them, or moves them to to when it is not nil),
// and returns the batch as finished. by and note are required. If a file
// cannot be hashed nothing is recorded and nothing removed; if it fails
// after the batch was committed, the batch stays unfinished for Resume.
//
// The caller holds the queue's replay lock (queue.Dir.LockReplays) from
// before it resolved p until Run returns, and has finished the discards a
// killed run left (ResumeLocked).
func Run(ctx context.Context, d *queue.Dir, l *ledger.DB, p replay.Plan, by, note string, to *queue.Target) (ledger.DiscardBatch, error) {
	items, err := hashItems(d, p)
	if err != nil {
		return ledger.DiscardBatch{}, err
	}
	return run(ctx, d, l, nil, items, by, note, to)
}

// RunTask is Run recorded as a task of one move: the batch is begun
// together with task t (ledger.DB.BeginDiscardTask), so that the discard
// is listed with the tasks, and the task ends done when the batch is
// finished, by this run or, after a kill, by whichever run finishes it.
// t says who asked, how and what (By, Role, Via, Note, Request); its
// Kind, Files and Digest are set from p. It returns the task's id with
// the batch.
func RunTask(ctx context.Context, d *queue.Dir, l *ledger.DB, p replay.Plan, t ledger.TaskRecord, by, note string, to *queue.Target) (int64, ledger.DiscardBatch, error) {
	items, err := hashItems(d, p)
	if err != nil {
		return 0, ledger.DiscardBatch{}, err
	}
	files := make([]ledger.TaskFile, len(items))
	for i, it := range items {
		files[i] = ledger.TaskFile{Idx: it.Idx, File: it.File, Ino: it.Ino, ContentHash: it.ContentHash, Size: it.Size, MsgID: it.MsgID, Reason: it.Reason}
	}
	t.Kind, t.Files, t.Skipped, t.Digest = "discard", len(items), 0, p.Digest()
	var task int64
	b, err := begin(ctx, d, l, items, by, note, to, func(toDir string, at time.Time) (id int64, err error) {
		task, id, err = l.BeginDiscardTask(ctx, t, files, by, note, toDir, at, items)
		return id, err
	})
	return task, b, err
}

// hashItems are the batch items of p, each file hashed as it is now.
func hashItems(d *queue.Dir, p replay.Plan) ([]ledger.DiscardItem, error) {
	items := make([]ledger.DiscardItem, len(p.Steps))
	for i, s := range p.Steps {
		if err := queue.CheckName(s.File); err != nil {
			return nil, fmt.Errorf("discard: %w", err)
		}
		hash, size, err := d.HashFile(queue.Error, s.File, s.Ino)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("discard %s: %w", s.File, ErrGone)
		}
		if err != nil {
			return nil, fmt.Errorf("discard: %w", err)
		}
		msgID := s.MessageKey()
		items[i] = ledger.DiscardItem{Idx: i, File: s.File, Ino: s.Ino, MsgID: msgID, Reason: s.Reason, ContentHash: hash, Size: size}
	}
	return items, nil
}

// RunChunk is Run for chunk c of a task (package task): the batch holds
// items, hashed when the task was asked and checked since by the caller,
// under the task's own numbering (Idx), and is begun with the task's
// cursor in one transaction (ledger.DB.BeginTaskDiscard), so a chunk is
// begun once however many runs try it. It fails wrapping
// ledger.ErrTaskState, having changed nothing, when the task is no longer
// running or another run took the chunk.
func RunChunk(ctx context.Context, d *queue.Dir, l *ledger.DB, c ledger.TaskChunk, items []ledger.DiscardItem, by, note string, to *queue.Target) (ledger.DiscardBatch, error) {
	for _, it := range items {
		if err := queue.CheckName(it.File); err != nil {
			return ledger.DiscardBatch{}, fmt.Errorf("discard: %w", err)
		}
	}
	return run(ctx, d, l, &c, items, by, note, to)
}

// run commits the batch of items (for chunk c of a task when c is not
// nil) and finishes it.
func run(ctx context.Context, d *queue.Dir, l *ledger.DB, c *ledger.TaskChunk, items []ledger.DiscardItem, by, note string, to *queue.Target) (ledger.DiscardBatch, error) {
	return begin(ctx, d, l, items, by, note, to, func(toDir string, at time.Time) (int64, error) {
		if c != nil {
			return l.BeginTaskDiscard(ctx, *c, by, note, toDir, at, items)
		}
		return l.BeginDiscard(ctx, by, note, toDir, at, items)
	})
}

// begin commits the batch of items with commit, which records it (to
// toDir, at at) and returns its id, and finishes it.
func begin(ctx context.Context, d *queue.Dir, l *ledger.DB, items []ledger.DiscardItem, by, note string, to *queue.Target, commit func(toDir string, at time.Time) (int64, error)) (ledger.DiscardBatch, error) {
	toDir := ""
	if to != nil {
		toDir = to.Path()
	}
	now := time.Now()
	id, err := commit(toDir, now)
	if err != nil {
		return ledger.DiscardBatch{}, fmt.Errorf("discard: %w", err)
	}
	b := ledger.DiscardBatch{ID: id, By: by, Note: note, Created: now, State: ledger.IntentPending, ToDir: toDir, Items: items}
	return finish(ctx, d, l, b, to)
}

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
	batches, err := l.UnfinishedDiscards(ctx)
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
		fin, err := finish(ctx, d, l, b, to)
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

// finish takes a batch from the state it is in to done, and returns it
// with each item's outcome.
func finish(ctx context.Context, d *queue.Dir, l *ledger.DB, b ledger.DiscardBatch, to *queue.Target) (ledger.DiscardBatch, error) {
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
		if err := l.StageDiscard(ctx, b.ID, missing); err != nil {
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
	if err := l.FinishDiscard(ctx, b.ID, b.Items, now); err != nil {
		return b, err
	}
	b.State, b.Finished = ledger.IntentDone, now
	return b, nil
}
