package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/replay"
	"github.com/spoolq/spool/task"
)

// spool replay and spool discard are one path: the flags become a
// task.Request, which askTask hands to the task service (task.Service.Do,
// or Preview for --dry-run); what comes back is printed here. The rules
// (what a request may be, the policy, the audit, the moves) are the
// service's.

// taskFlags are the flags of spool replay and spool discard that narrow
// the selection (the filters) and pace the moves (--rate).
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
	fs.Float64Var(&tf.rate, "rate", 0, "move at most `N` files a second, in chunks a cancel can stop between (spool resume goes on after a kill)")
	return tf
}

// any reports whether a filter or --rate was given: the run is then
// reported as a task (its id, its end), not file by file alone.
func (tf *taskFlags) any() bool {
	for _, n := range []string{"since", "until", "detail-match", "msg-id", "order-no", "rate"} {
		if cmdline.Given(tf.fs, n) {
			return true
		}
	}
	return false
}

// selection is the task selection of names, reason, all and the filters,
// refused (exit 2) before anything is opened when it cannot be right.
func (tf *taskFlags) selection(e *env, names []string, reason string, reasonGiven, all bool) (task.Selection, error) {
	s := task.Selection{Names: names, Reason: reason, All: all, DetailMatch: tf.detail, MsgID: tf.msgID, OrderNo: tf.orderN}
	if reasonGiven && reason == "" {
		if len(names) > 0 || all {
			return s, e.Usage("give FILE names, --reason or --all, not several")
		}
		return s, e.Usage("--reason is empty")
	}
	now := time.Now()
	var err error
	for _, f := range []struct {
		name, val string
		to        *time.Time
	}{{"since", tf.since, &s.Since}, {"until", tf.until, &s.Until}} {
		if !cmdline.Given(tf.fs, f.name) {
			continue
		}
		if *f.to, err = queueopen.ParseSince(f.val, now); err != nil {
			return s, e.Usage("--%s: %v", f.name, err)
		}
	}
	for _, f := range []struct{ name, val string }{{"detail-match", tf.detail}, {"msg-id", tf.msgID}, {"order-no", tf.orderN}} {
		if cmdline.Given(tf.fs, f.name) && f.val == "" {
			return s, e.Usage("--%s is empty", f.name)
		}
	}
	if cmdline.Given(tf.fs, "rate") && tf.rate <= 0 {
		return s, e.Usage("--rate %v: want files a second > 0", tf.rate)
	}
	switch err := s.Check(); {
	case errors.Is(err, replay.ErrNoSelection):
		return s, e.Usage("missing FILE (or --reason R, or --all)")
	case errors.Is(err, replay.ErrManySelections):
		return s, e.Usage("give FILE names, --reason or --all, not several")
	case err != nil:
		return s, taskUsage(err)
	}
	return s, nil
}

// taskRun is what spool replay and spool discard hand to askTask.
type taskRun struct {
	dir, db string
	req     task.Request
	dryRun  bool
	// plain: no filter or --rate was given; without a policy the run is
	// then printed file by file alone, as spool replay always printed.
	plain bool
}

// taskService opens the queue at dir and its ledger (for reading only
// when readOnly), with its contract (cf's, or spool.conf's when cf is
// nil) and policy, as a task.Service of this process
// (queueopen.OpenTasks), its refusals worded for the command line.
func taskService(ctx context.Context, dir, db string, cf *contractFlags, readOnly bool) (*task.Service, func(*error), error) {
	var over queueopen.Override
	if cf != nil {
		over = cf.override()
	}
	o := ledgerOpts{use: writeLedger}
	if readOnly {
		o = ledgerOpts{use: readLedger, readOnly: true}
	}
	qo := o.options(db)
	qo.Override = over
	s, closeAll, err := queueopen.OpenTasks(ctx, dir, qo, currentOperator().Identity())
	if err != nil {
		return nil, nil, ledgerFailure(policyUsage(err), dir, db)
	}
	return s, func(err *error) {
		if cerr := closeAll(); cerr != nil && *err == nil {
			*err = cerr
		}
	}, nil
}

// askTask asks the task service for r's replay or discard as the OS user,
// and prints what it did: with --dry-run the preview, else the run (or
// the task waiting for approval).
func askTask(ctx context.Context, e *env, cf *contractFlags, r taskRun) (err error) {
	o := ledgerOpts{use: writeLedger}.options(r.db)
	if cf != nil {
		o.Override = cf.override()
	}
	// The rules of asking (the request checked and a discard's access
	// before anything is opened, a named OS user under a policy) are
	// queueopen.AskTasks'.
	s, who, closeAll, err := queueopen.AskTasks(ctx, r.dir, o, currentOperator(), r.req, r.dryRun)
	if err != nil {
		return ledgerFailure(policyUsage(taskUsage(err)), r.dir, r.db)
	}
	defer func() {
		if cerr := closeAll(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	plain := r.plain && !s.Policy.Set
	if r.dryRun {
		p, err := s.Preview(ctx, r.req)
		if err != nil {
			return taskUsage(err)
		}
		printPreview(e, r.req, p, true)
		if !plain {
			fmt.Fprintf(e.Stdout, "%d files (sha256 %s), %d skipped%s\n", p.Count, p.Digest, p.Skipped, approvalNote(p.NeedsApproval))
		}
		return nil
	}
	opt := runOptions(e)
	opt.OnPreview = func(p task.Preview) { printPreview(e, r.req, p, false) }
	if !plain {
		opt.OnStart = func(t task.Task) { fmt.Fprintf(e.Stdout, "task %d: %s of %d files\n", t.ID, t.Kind, t.Files) }
	}
	t, err := s.Do(ctx, who, r.req, opt)
	switch {
	case errors.Is(err, task.ErrNothing):
		return nil
	case err != nil && t.ID == 0:
		return taskUsage(err)
	case err != nil && (ctx.Err() != nil || errors.Is(err, context.Canceled)):
		return fmt.Errorf("%w (task %d stopped at %d of %d files: spool resume %s %d goes on)", err, t.ID, t.Next, t.Files, r.dir, t.ID)
	case err != nil:
		return fmt.Errorf("%w (task %d is recorded: spool resume %s %d goes on once the cause is fixed)", err, t.ID, r.dir, t.ID)
	case t.State == task.StateWaiting:
		fmt.Fprintf(e.Stdout, "task %d: %s of %d files waits for approval (sha256 %s): spool approve %s %d\n",
			t.ID, t.Kind, t.Files, t.Digest, r.dir, t.ID)
	case !plain:
		task.WriteEnd(e.Stdout, t)
	}
	return nil
}

// printPreview prints the files p selected (task.WritePreview), and
// warns when it selected nothing.
func printPreview(e *env, req task.Request, p task.Preview, dry bool) {
	if warning := task.WritePreview(e.Stdout, req, p, dry); warning != "" {
		e.Warn("%s", warning)
	}
}

// approvalNote is the dry run's word on the policy.
func approvalNote(needs bool) string {
	if needs {
		return ", needs approval"
	}
	return ""
}

// taskFields are the fields of a task.RequestError that a flag gives, by
// the name the service gives them.
var taskFields = map[string]string{"to": "to", "reason": "reason", "detail_match": "detail-match", "msg_id": "msg-id",
	"order_no": "order-no", "since": "since", "until": "until", "note": "note", "rate": "rate", "force": "force", "by": "by", "digest": "digest"}

// taskUsage words a *task.RequestError as a usage error (exit 2) naming
// its field as the flag that gives it; other errors are returned as they
// are.
func taskUsage(err error) error {
	var re *task.RequestError
	if !errors.As(err, &re) {
		return err
	}
	msg := oneLine(err.Error())
	if f, ok := taskFields[re.Field]; ok && strings.HasPrefix(msg, re.Field) {
		msg = "--" + f + msg[len(re.Field):]
	}
	return &cmdline.UsageError{Msg: msg}
}

// runOptions print a run's moves as they are made: a line per file moved,
// a warning per file found changed since the request, and per replay or
// discard a killed run left and this one finished.
func runOptions(e *env) task.RunOptions {
	return task.RunOptions{
		OnChunk: func(c task.Chunk) {
			for _, r := range c.Replays {
				fmt.Fprintf(e.Stdout, "replayed %s -> inbox/%s\n", cell(r.File), cell(r.NewName))
			}
			printDiscards(e, c.Discarded)
			for _, f := range c.Changed {
				e.Warn("skip %s: %s since the request", cell(f.File), f.ChangedWhy)
			}
		},
		OnResumed:        func(f replay.Finished) { warnFinished(e, f) },
		OnResumedDiscard: func(b ledger.DiscardBatch) { warnDiscardFinished(e, b) },
	}
}

// runTask runs task id as who, printing each file as it moves, and the
// task's end.
func runTask(ctx context.Context, e *env, s *task.Service, who task.Identity, id int64, dir string) error {
	t, err := s.Run(ctx, who, id, runOptions(e))
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return fmt.Errorf("%w (task %d stopped at %d of %d files: spool resume %s %d goes on)", err, id, t.Next, t.Files, dir, id)
		}
		if t.ID != 0 && t.State != task.StateWaiting && !errors.Is(err, task.ErrState) {
			return fmt.Errorf("%w (task %d: spool resume %s %d goes on once the cause is fixed)", err, id, dir, id)
		}
		return err
	}
	task.WriteEnd(e.Stdout, t)
	return nil
}
