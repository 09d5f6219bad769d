// Package replay moves dead letters from error/ back to inbox/ so that a
// replay killed at any instant is finished by the next run: in the end
// either every file it selected was replayed, each with one replay record
// and its history kept, or none was.
//
// A replay goes in four durable steps (docs/DESIGN.md, "Replay"):
//
//  1. the intent, with every selected file's name and inode, is committed
//     to the ledger (state pending) before anything moves;
//  2. each file is renamed within error/ to a hidden staging name of its
//     own (queue.StagingName), then the intent is marked staged;
//  3. each staged file is renamed into inbox/;
//  4. one replay record per file is committed and the intent marked done,
//     in one transaction.
//
// A run killed before step 1 commits changed nothing. Killed in step 2,
// the files not yet staged are still under their names, with the inodes
// the intent recorded; killed in step 3, the files still staged are the
// ones not yet moved, and a file gone from its staging name has moved.
// Resume finishes every unfinished intent from there, forward: the
// operator asked for these files to be replayed, and the intent is the
// record of that.
//
// Step 1 is package task's, the one runner of replays and discards: it
// commits the intent as a chunk of a task (ledger.Tasks.Start,
// Tasks.BeginChunk) and then calls Finish, which does steps 2 to 4. Resume
// runs Finish on every intent a killed run left unfinished.
package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// Resume finishes every replay left unfinished by a run that was killed or
// failed, and returns the intents it finished with their records. It takes
// the queue's replay lock for the time it runs.
func Resume(ctx context.Context, d *queue.Dir, l *ledger.DB) (_ []Finished, err error) {
	unlock, err := d.LockReplays(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if uerr := unlock(); err == nil && uerr != nil {
			err = fmt.Errorf("resume replays: unlock: %w", uerr)
		}
	}()
	return ResumeLocked(ctx, d, l)
}

// ResumeLocked is Resume for a caller that holds the replay lock.
func ResumeLocked(ctx context.Context, d *queue.Dir, l *ledger.DB) ([]Finished, error) {
	intents, err := l.Replays().Unfinished(ctx)
	if err != nil {
		return nil, fmt.Errorf("resume replays: %w", err)
	}
	var out []Finished
	for _, in := range intents {
		recs, err := Finish(ctx, d, l, in)
		if err != nil {
			return out, fmt.Errorf("resume replay %d: %w", in.ID, err)
		}
		out = append(out, Finished{Intent: in, Replays: recs})
	}
	return out, nil
}

// Finished is an intent Resume finished.
type Finished struct {
	Intent  ledger.ReplayIntent
	Replays []ledger.Replay
}

// Finish takes intent in from the state it is in to done (steps 2 to 4),
// and returns one record per file moved, in the intent's order; a file
// gone from error/ before its move gets none. Its items' names must be
// plain (queue.CheckName). The caller holds the queue's replay lock
// (queue.Dir.LockReplays). If it fails, the intent stays unfinished for
// Resume.
func Finish(ctx context.Context, d *queue.Dir, l *ledger.DB, in ledger.ReplayIntent) ([]ledger.Replay, error) {
	if in.State == ledger.IntentPending {
		for _, it := range in.Items {
			if _, err := d.Stage(in.ID, it.Idx, it.File, it.Ino); err != nil {
				return nil, err
			}
		}
		if err := d.Sync(queue.Error); err != nil {
			return nil, err
		}
		if err := l.Replays().Stage(ctx, in.ID); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	names := make([]string, len(in.Items))
	var gone []uint64
	for i, it := range in.Items {
		name, moved, err := d.Release(in.ID, it.Idx, it.File)
		if err != nil {
			return nil, err
		}
		names[i] = name
		if !moved && it.Ino != 0 {
			gone = append(gone, it.Ino)
		}
	}
	// Gone from its staging name: it moved to inbox/ before the run that
	// staged it was killed, or it never was staged (removed from error/ by
	// hand before the replay reached it). Where it is now tells which;
	// found for all of them in one pass over the stages.
	var at map[uint64]queue.Located
	if len(gone) > 0 {
		var err error
		if at, err = d.LocateAll(gone); err != nil {
			return nil, err
		}
	}
	var recs []ledger.Replay
	for i, it := range in.Items {
		name := names[i]
		if name == "" {
			l, found := at[it.Ino]
			if it.Ino == 0 || !found {
				continue
			}
			name = l.Name
		}
		recs = append(recs, ledger.Replay{File: it.File, NewName: name, Ino: it.Ino, By: in.By, Note: in.Note, At: now})
	}
	if err := d.Sync(queue.Inbox, queue.Error); err != nil {
		return nil, err
	}
	if err := l.Replays().Finish(ctx, in.ID, recs, now); err != nil {
		return nil, err
	}
	return recs, nil
}
