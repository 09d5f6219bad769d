package queueopen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/task"
)

// ApprovalPolicy is the approval section of the spool.conf of the queue
// at dir, read strictly with the rest of the file (ReadConfig), and the
// file's path; task.NoPolicy (Set false) when the file or the section is
// missing. A section task.ParsePolicy refuses is an invalid *ConfigError.
// It is what the ledger adopts the first time it sees one
// (task.Service.QueuePolicy); from then on the ledger's policy is the
// queue's.
func ApprovalPolicy(dir string) (task.Policy, string, error) {
	path := filepath.Join(dir, ConfigName)
	c, err := ReadConfig(dir) // every key checked, "approval" among them
	if err != nil || c == nil || c.Approval == nil {
		return task.NoPolicy, path, err
	}
	p, err := task.ParsePolicy(c.Approval)
	if err != nil {
		return task.NoPolicy, path, &ConfigError{Path: path, Err: err, Invalid: true}
	}
	return p, path, nil
}

// PolicyState is a queue's approval policy (four eyes): the ledger's,
// with who set it and when, and the approval section of spool.conf (Conf,
// of the file File) beside it.
type PolicyState struct {
	Ledger task.PolicyRecord
	Conf   task.Policy
	File   string
}

// Differs reports whether spool.conf's section says otherwise than the
// ledger's policy: the commands that read it refuse
// (task.ErrPolicyMismatch) until it says the same or is removed.
func (p PolicyState) Differs() bool { return !p.Ledger.Matches(p.Conf) }

// ReadPolicy reads the approval policy of the queue at dir: spool.conf's
// section (ApprovalPolicy), then the ledger's (task.LedgerPolicy), the
// ledger opened as o says for reading: read-only when its schema is
// current, as a reader who may not write it needs, else without
// ReadOnly, which migrates it. A refusal of the second opening is
// Attach's.
func ReadPolicy(ctx context.Context, dir string, o Options) (st PolicyState, err error) {
	if st.Conf, st.File, err = ApprovalPolicy(dir); err != nil {
		return st, err
	}
	o.Use, o.ReadOnly = Read, true
	d, l, err := openBound(ctx, dir, o)
	if err != nil {
		o.ReadOnly = false
		if d, l, err = openBound(ctx, dir, o); err != nil {
			return st, err
		}
	}
	defer closeBound(d, l, &err)
	st.Ledger, err = task.LedgerPolicy(ctx, l)
	return st, err
}

// ChangePolicy applies settings (KEY=VALUE, task.Policy.With's) to the
// approval policy of the queue at dir as op, and makes the result the
// ledger's, with an audit row (task.Service.ChangePolicy): spool policy
// set. A bad setting is refused before anything is opened, and one the
// service refuses changes nothing; both wrap task.ErrBadRequest. op must
// be a named OS user whatever the policy (task.Service.OperatorIdentity,
// strict, its refusal audited): who changes four eyes must be someone.
// The ledger is opened for writing as o says. It returns the policy
// before and after, with spool.conf's section beside the latter; a
// change by another between the two reads is ledger.ErrPolicyChanged.
func ChangePolicy(ctx context.Context, dir string, o Options, op task.Operator, settings []string) (from task.PolicyRecord, now PolicyState, err error) {
	if now.Conf, now.File, err = ApprovalPolicy(dir); err != nil {
		return from, now, err
	}
	var probe task.Policy
	for _, s := range settings {
		if probe, err = probe.With(s); err != nil {
			return from, now, err
		}
	}
	o.Use = Write
	d, l, err := openBound(ctx, dir, o)
	if err != nil {
		return from, now, err
	}
	defer closeBound(d, l, &err)
	s := &task.Service{Ledger: l, Host: queue.Host(), PID: os.Getpid()}
	who, err := s.OperatorIdentity(ctx, op, task.PolicyAction, "", true)
	if err != nil {
		return from, now, err
	}
	from, now.Ledger, err = s.ChangePolicy(ctx, who, now.Conf, settings)
	return from, now, err
}

// openBound opens the queue at dir (OpenDir) and its ledger (Attach), as
// a command that reads or changes both does; closeBound closes them.
func openBound(ctx context.Context, dir string, o Options) (*queue.Dir, *ledger.DB, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, nil, err
	}
	l, err := Attach(ctx, d, o)
	if err != nil {
		_ = d.Close() // the error that matters is the ledger's
		return nil, nil, err
	}
	return d, l, nil
}

// closeBound closes l and d, keeping the first error in *err.
func closeBound(d *queue.Dir, l *ledger.DB, err *error) {
	lerr, derr := l.Close(), d.Close()
	switch {
	case *err != nil:
	case lerr != nil:
		*err = fmt.Errorf("close ledger: %w", lerr)
	case derr != nil:
		*err = fmt.Errorf("close queue: %w", derr)
	}
}
