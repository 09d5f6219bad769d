package queueopen

import (
	"context"
	"os"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/hold"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/task"
)

// TaskService returns the task service of the queue d, its ledger l and
// contract c, for this process (queue.Host, its PID), under the queue's
// approval policy: the ledger's, which adopts conf, the approval section
// of the queue's spool.conf at file (ApprovalPolicy), the first time it
// sees one when adopt, audited as who (task.Service.QueuePolicy; a dry
// run or a reader only reads it). A section that says otherwise than the
// ledger is a *task.PolicyMismatchError. Every face builds its service
// with it: the replays and discards of the command line, and serve's
// API and console.
func TaskService(ctx context.Context, d *queue.Dir, l *ledger.DB, c spool.Contract, conf task.Policy, file string, who task.Identity, adopt bool) (*task.Service, error) {
	s := &task.Service{Dir: d, Ledger: l, Contract: c, Host: queue.Host(), PID: os.Getpid()}
	p, err := s.QueuePolicy(ctx, who, conf, file, adopt)
	if err != nil {
		return nil, err
	}
	s.Policy = p
	return s, nil
}

// HoldService returns the hold service of the queue d, its ledger l and
// contract c, for this process (queue.Host, its PID); its files are
// batch files when the queue's spool.conf conf (nil for none) gives a
// format (Config.Batched). The command line's pause and hold and serve's
// API and console build theirs with it.
func HoldService(d *queue.Dir, l *ledger.DB, c spool.Contract, conf *Config) *hold.Service {
	return &hold.Service{Dir: d, Ledger: l, Contract: c, Records: conf.Batched(), Host: queue.Host(), PID: os.Getpid()}
}

// OpenTasks opens the queue at dir for its replays and discards, in one
// call, as every face's task commands do: its contract (spool.conf with
// o.Override, LoadContract) and approval section (ApprovalPolicy) read
// first, then the directory (OpenDir) and its ledger (Attach with o: for
// Read with o.ReadOnly a dry run or a reader, for Write the runs), and the
// task service under the ledger's policy as who (TaskService, adopting
// spool.conf's section unless the ledger is only read). close closes the
// ledger, then the queue, and returns the first error. On error
// nothing is left open.
func OpenTasks(ctx context.Context, dir string, o Options, who task.Identity) (s *task.Service, close func() error, err error) {
	c, _, err := LoadContract(dir, o.Override)
	if err != nil {
		return nil, nil, err
	}
	policy, file, err := ApprovalPolicy(dir)
	if err != nil {
		return nil, nil, err
	}
	d, l, err := openBound(ctx, dir, o)
	if err != nil {
		return nil, nil, err
	}
	close = func() (err error) {
		closeBound(d, l, &err)
		return err
	}
	// The ledger's policy, which adopts spool.conf's section the first
	// time it sees one (a reader only reads it).
	if s, err = TaskService(ctx, d, l, c, policy, file, who, o.Use != Read); err != nil {
		_ = close() // the error that matters is the policy's
		return nil, nil, err
	}
	return s, close, nil
}

// AskTasks opens the task service of the queue at dir to ask it req, a
// replay or a discard, as op, with the rules of asking: req is checked
// (task.Request.Check: a *task.RequestError) and a discard by one who
// may not write error/ refused (task.CheckDiscardAccess) before anything
// is opened; a dry run (dryRun: task.Service.Preview) opens the ledger
// for reading alone and needs no identity; otherwise the ledger is
// opened for writing and who is op's identity, which under an approval
// policy must be a named OS user (task.Service.OperatorIdentity, strict
// then, its refusal audited). o is OpenTasks', its Use and ReadOnly set
// here. close closes the service's queue and ledger.
func AskTasks(ctx context.Context, dir string, o Options, op task.Operator, req task.Request, dryRun bool) (s *task.Service, who task.Identity, close func() error, err error) {
	if err := req.Check(); err != nil {
		return nil, who, nil, err
	}
	if !dryRun && req.Kind == task.Discard {
		if err := task.CheckDiscardAccess(dir, op); err != nil {
			return nil, who, nil, err
		}
	}
	o.Use, o.ReadOnly = Write, false
	if dryRun {
		o.Use, o.ReadOnly, o.Audit = Read, true, ledger.AuditEntry{}
	}
	if s, close, err = OpenTasks(ctx, dir, o, op.Identity()); err != nil || dryRun {
		return s, who, close, err
	}
	if who, err = s.OperatorIdentity(ctx, op, string(req.Kind), "", s.Policy.Set); err != nil {
		_ = close() // the error that matters is the refusal
		return nil, who, nil, err
	}
	return s, who, close, nil
}

// OpenHolds opens the queue at dir and its ledger for writing (Attach, as
// o says, its Use set here; for reading alone with o.ReadOnly, which
// hold.Service.State needs), with the contract spool.conf and o.Override
// give, as the queue's hold.Service (HoldService): what spool hold,
// release, pause, resume and holds act through. close closes the queue
// and the ledger.
func OpenHolds(ctx context.Context, dir string, o Options) (s *hold.Service, close func() error, err error) {
	c, conf, err := LoadContract(dir, o.Override)
	if err != nil {
		return nil, nil, err
	}
	o.Use = Write
	if o.ReadOnly {
		o.Use = Read
	}
	d, l, err := openBound(ctx, dir, o)
	if err != nil {
		return nil, nil, err
	}
	return HoldService(d, l, c, conf), func() (err error) {
		closeBound(d, l, &err)
		return err
	}, nil
}
