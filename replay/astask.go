package replay

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// ExecuteTask is Execute recorded as a task of one move: the intent is
// begun together with task t (ledger.DB.BeginReplayTask), so that the
// replay is listed with the tasks, and the task ends done when the intent
// is finished, by this run or, after a kill, by whichever run finishes
// it. t says who asked, how and what (By, Role, Via, Note, Request); its
// Kind, Files, Skipped and Digest are set from p. It returns the task's
// id (0 when p moves nothing, which records nothing) and the records.
// The caller holds the replay lock, as for Execute.
func ExecuteTask(ctx context.Context, d *queue.Dir, l *ledger.DB, p Plan, t ledger.TaskRecord, by, note string) (int64, []ledger.Replay, error) {
	var items []ledger.ReplayItem
	var files []ledger.TaskFile
	for _, s := range p.Steps {
		if s.Skip {
			continue
		}
		if err := queue.CheckName(s.File); err != nil {
			return 0, nil, fmt.Errorf("replay: %w", err)
		}
		i := len(items)
		items = append(items, ledger.ReplayItem{Idx: i, File: s.File, Ino: s.Ino})
		files = append(files, ledger.TaskFile{Idx: i, File: s.File, Ino: s.Ino, MsgID: s.MessageKey(), Reason: s.Reason})
	}
	if len(items) == 0 {
		return 0, nil, nil
	}
	t.Kind, t.Files, t.Skipped, t.Digest = "replay", len(items), len(p.Steps)-len(items), p.Digest()
	now := time.Now()
	task, id, err := l.BeginReplayTask(ctx, t, files, by, note, now, items)
	if err != nil {
		return 0, nil, fmt.Errorf("replay: %w", err)
	}
	in := ledger.ReplayIntent{ID: id, By: by, Note: note, Created: now, State: ledger.IntentPending, Items: items}
	recs, err := finish(ctx, d, l, in)
	return task, recs, err
}

// MessageKey is the step's message key: the one read from the file with the
// contract, else the one the ledger recorded.
func (s Step) MessageKey() string {
	if s.Key != "" {
		return s.Key
	}
	return s.MsgID
}
