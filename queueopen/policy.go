package queueopen

import (
	"context"
	"os"
	"path/filepath"

	"github.com/spoolq/spool"
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
