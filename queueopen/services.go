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
