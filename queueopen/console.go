package queueopen

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/console"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/metrics"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/task"
)

// NewConsole starts the API and the web console of the queue d at dir,
// with its ledger l and contract c (of its spool.conf conf, nil for
// none), for the identities of tokens: serve --auth's and consume
// --auth's, built once here. Its charts sample the gauges of m every
// refresh, as often as they change. Its tasks run as who under the
// queue's approval policy: the ledger's, adopting spool.conf's section
// the first time (a section that says otherwise is a
// *task.PolicyMismatchError); the tasks a killed serve or consumer left
// approved or running are resumed. The caller closes it.
func NewConsole(ctx context.Context, dir string, d *queue.Dir, l *ledger.DB, c spool.Contract, conf *Config, tokens task.Tokens, m *metrics.Metrics, refresh time.Duration, who task.Identity, logger *slog.Logger) (*console.Server, error) {
	// The service reads the ledger's policy again at each request, so
	// that spool policy set applies to a server that runs on.
	policy, file, err := ApprovalPolicy(dir)
	if err != nil {
		return nil, err
	}
	svc, err := TaskService(ctx, d, l, c, policy, file, who, true)
	if err != nil {
		return nil, err
	}
	gauges := func() []console.StageGauge {
		var out []console.StageGauge
		for _, g := range m.Stages() {
			sg := console.StageGauge{Stage: string(g.Stage), Messages: int64(g.Messages), NotTaken: int64(g.NotTaken)}
			if g.HasAge {
				a := g.Oldest.Seconds()
				sg.Oldest = &a
			}
			if g.Waiting > 0 {
				a := g.WaitingOldest.Seconds()
				sg.Waiting, sg.WaitingOldest = int64(g.Waiting), &a
			}
			out = append(out, sg)
		}
		return out
	}
	srv, err := console.New(console.Options{Dir: d, Ledger: l, Tokens: tokens, Tasks: svc, Holds: HoldService(d, l, c, conf), Gauges: gauges, Log: logger,
		Host: queue.Host(), PID: os.Getpid(), SampleEvery: refresh})
	if err != nil {
		return nil, err
	}
	if err := srv.Start(ctx); err != nil {
		return nil, err
	}
	return srv, nil
}
