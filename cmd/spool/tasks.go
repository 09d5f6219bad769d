package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/replay"
	"github.com/spoolq/spool/task"
)

// taskFlags are the flags of spool replay and spool discard that make
// the run a durable task (package task): the filters and the rate.
type taskFlags struct {
	fs                    *flag.FlagSet
	since, until          string
	detail, msgID, orderN string
	rate                  float64
}

// addTaskFlags registers the filters and --rate on fs.
func addTaskFlags(fs *flag.FlagSet) *taskFlags {
	tf := &taskFlags{fs: fs}
	fs.StringVar(&tf.since, "since", "", "only dead letters dead-lettered at or after `T`: an RFC 3339 time, or a duration ago (24h, 7d)")
	fs.StringVar(&tf.until, "until", "", "only dead letters dead-lettered before `T` (as --since)")
	fs.StringVar(&tf.detail, "detail-match", "", "only dead letters whose recorded detail matches `REGEX` (Go syntax)")
	fs.StringVar(&tf.msgID, "msg-id", "", "only the dead letters of msg_id `ID`")
	fs.StringVar(&tf.orderN, "order-no", "", "only the dead letters whose ordering key (order_no, or the contract's) is `K`")
	fs.Float64Var(&tf.rate, "rate", 0, "move at most `N` files a second (a task: resumed by spool resume)")
	return tf
}

// any reports whether a flag that makes a task was given.
func (tf *taskFlags) any() bool {
	for _, n := range []string{"since", "until", "detail-match", "msg-id", "order-no", "rate"} {
		if given(tf.fs, n) {
			return true
		}
	}
	return false
}

// selection is the task selection of names, reason, all and the filters.
func (tf *taskFlags) selection(e *env, names []string, reason string, all bool) (task.Selection, error) {
	s := task.Selection{Names: names, Reason: reason, All: all, DetailMatch: tf.detail, MsgID: tf.msgID, OrderNo: tf.orderN}
	now := time.Now()
	var err error
	for _, f := range []struct {
		name, val string
		to        *time.Time
	}{{"since", tf.since, &s.Since}, {"until", tf.until, &s.Until}} {
		if !given(tf.fs, f.name) {
			continue
		}
		if *f.to, err = parseSince(f.val, now); err != nil {
			return s, e.usage("--%s: %v", f.name, err)
		}
	}
	for _, f := range []struct{ name, val string }{{"detail-match", tf.detail}, {"msg-id", tf.msgID}, {"order-no", tf.orderN}} {
		if given(tf.fs, f.name) && f.val == "" {
			return s, e.usage("--%s is empty", f.name)
		}
	}
	if given(tf.fs, "rate") && tf.rate <= 0 {
		return s, e.usage("--rate %v: want files a second > 0", tf.rate)
	}
	return s, nil
}

// taskRun is what spool replay and spool discard hand to runAsTask.
type taskRun struct {
	dir, db  string
	req      task.Request
	by       string // --by, "" when not given
	dryRun   bool
	contract spool.Contract
	policy   task.Policy
}

// newService opens what a task needs: the queue and its ledger for
// writing, as a task.Service of this process.
func newService(ctx context.Context, dir, db string, c spool.Contract, p task.Policy) (*task.Service, func(*error), error) {
	d, l, done, err := openBound(ctx, dir, db, ledgerOpts{use: writeLedger})
	if err != nil {
		return nil, nil, err
	}
	return &task.Service{Dir: d, Ledger: l, Contract: c, Policy: p, Host: queue.Host(), PID: os.Getpid()}, done, nil
}

// runAsTask runs a replay or discard as a durable task: recorded with its
// file set, then run here at once, or left waiting for spool approve when
// the policy asks for a second operator.
func runAsTask(ctx context.Context, e *env, r taskRun) (err error) {
	if err := r.req.Check(); err != nil {
		return taskUsage(e, err)
	}
	s, done, err := newService(ctx, r.dir, r.db, r.contract, r.policy)
	if err != nil {
		return err
	}
	defer done(&err)
	if r.req.To != "" {
		// Refused before anything is recorded, as spool discard --to is.
		target, err := s.Dir.OpenTarget(r.req.To)
		if errors.Is(err, queue.ErrTargetCrossDevice) || errors.Is(err, queue.ErrTargetInQueue) {
			return &usageError{msg: "--to " + err.Error()}
		}
		if err != nil {
			return &inputError{path: r.req.To, err: err}
		}
		if err := target.Close(); err != nil {
			return err
		}
	}
	who, err := cliIdentity(ctx, s, string(r.req.Kind), r.by, r.policy.Set)
	if err != nil {
		return err
	}
	if r.dryRun {
		p, err := s.Preview(ctx, r.req)
		if err != nil {
			return taskUsage(e, err)
		}
		for _, f := range p.Files {
			fmt.Fprintf(e.stdout, "would %s %s\n", r.req.Kind, cell(f.File))
		}
		fmt.Fprintf(e.stdout, "%d files (sha256 %s), %d skipped%s\n", p.Count, p.Digest, p.Skipped, approvalNote(p.NeedsApproval))
		return nil
	}
	t, _, err := s.Create(ctx, who, r.req)
	if errors.Is(err, task.ErrNothing) {
		e.warn("no dead letter in error/ matches: nothing to %s", r.req.Kind)
		return nil
	}
	if err != nil {
		return taskUsage(e, err)
	}
	if t.State == task.StateWaiting {
		fmt.Fprintf(e.stdout, "task %d: %s of %d files waits for approval (sha256 %s): spool approve %s %d\n",
			t.ID, t.Kind, t.Files, t.Digest, r.dir, t.ID)
		return nil
	}
	fmt.Fprintf(e.stdout, "task %d: %s of %d files\n", t.ID, t.Kind, t.Files)
	return runTask(ctx, e, s, who, t.ID, r.dir)
}

// approvalNote is the dry run's word on the policy.
func approvalNote(needs bool) string {
	if needs {
		return ", needs approval"
	}
	return ""
}

// taskUsage maps a bad request to a usage error (exit 2).
func taskUsage(e *env, err error) error {
	if errors.Is(err, task.ErrBadRequest) {
		return e.usage("%v", err)
	}
	return err
}

// runTask runs task id as who, printing each file as it moves, and the
// task's end.
func runTask(ctx context.Context, e *env, s *task.Service, who task.Identity, id int64, dir string) error {
	opt := task.RunOptions{
		OnChunk: func(c task.Chunk) {
			for _, r := range c.Replays {
				fmt.Fprintf(e.stdout, "replayed %s -> inbox/%s\n", cell(r.File), cell(r.NewName))
			}
			printDiscards(e, c.Discarded)
			for _, f := range c.Changed {
				e.warn("skip %s: %s since the request", cell(f.File), f.ChangedWhy)
			}
		},
		OnResumed:        func(f replay.Finished) { warnFinished(e, f) },
		OnResumedDiscard: func(b ledger.DiscardBatch) { warnDiscardFinished(e, b) },
	}
	t, err := s.Run(ctx, who, id, opt)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return fmt.Errorf("%w (task %d stopped at %d of %d files: spool resume %s %d goes on)", err, id, t.Next, t.Files, dir, id)
		}
		if t.ID != 0 && t.State != task.StateWaiting && !errors.Is(err, task.ErrState) {
			return fmt.Errorf("%w (task %d: spool resume %s %d goes on once the cause is fixed)", err, id, dir, id)
		}
		return err
	}
	fmt.Fprintf(e.stdout, "task %d %s: %d of %d files %s, %d gone before, %d changed since the request\n",
		t.ID, t.State, t.Done, t.Files, doneWord(t.Kind), t.Missing, t.Changed)
	return nil
}

// doneWord is the past of kind.
func doneWord(k task.Kind) string {
	if k == task.Discard {
		return "discarded"
	}
	return "replayed"
}
