package main

import (
	"context"
	"os/signal"
	"syscall"

	"github.com/spoolq/spool/metrics"
	"github.com/spoolq/spool/queue"
)

var serveCommand = &command{
	name:    "serve",
	env:     true,
	args:    "DIR --listen ADDR [--metrics-refresh DURATION] [--db PATH] [--log-format text|json] [--log-level LEVEL]",
	summary: "serve a queue's metrics and health over HTTP without consuming it",
	help: `
Serves /metrics, /healthz and /readyz for the queue at DIR, as consume
--listen does, without consuming anything: the backlog and the age of the
oldest waiting message stay visible while no consumer runs (stopped for
maintenance, crashed, not yet deployed). It runs until SIGINT or SIGTERM,
then exits 0.

It opens the ledger as the reports do (status, dups): it never creates
one, never gives an empty database or schema the ledger's tables and never
binds the queue to it; a missing or foreign ledger is refused. Its counters (deliveries, dead letters, commits) stay at zero, since
it delivers nothing; the queue gauges are those of consume:
  spool_queue_messages{stage}            inbox, processing, done, error
  spool_queue_oldest_age_seconds{stage}  inbox, processing, error
listed in the background every --metrics-refresh (default 10s), each stage
no sooner than 100 times its last listing took, so that a scrape lists
nothing and costs the same on a million files in done/.

A stage replaced under its path (inbox/ moved aside or removed, and made
anew) is followed: the next listing counts the directory the path names
now, and a record "a stage of the queue was replaced" is logged.

/healthz answers 200 while the process serves. /readyz answers 200 when the
ledger answers a read within 2 s and every stage can take a new file (an
unnamed O_TMPFILE inode, or a .spool-tmp- file removed at once where the
filesystem lacks O_TMPFILE), else 503 with the reason. docs/OPERATIONS.md
lists every metric.

The address is logged once bound: a record "listening" with addr=HOST:PORT
(port 0 picks a free port).`,
}

func init() { serveCommand.run = runServe }

func runServe(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	lf := addLogFlags(flags)
	hf := addListenFlags(flags, "; required")
	db := addDBFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	if err := lf.check(e); err != nil {
		return err
	}
	if err := hf.check(e, true); err != nil {
		return err
	}
	stderr := &stderrWriter{w: e.stderr}
	e.stderr = stderr
	logger := lf.logger(stderr)
	if lf.json() {
		e.log = logger
	}
	d, l, done, err := openBound(ctx, pos[0], *db, ledgerOpts{use: readLedger, readOnly: true})
	if err != nil {
		return err
	}
	defer done(&err)
	// Nothing here holds a claim, so a stage replaced under its path (an
	// operator's new inbox/) is followed rather than reported empty.
	follow := queue.NewFollow(d, func() {
		logger.Info("a stage of the queue was replaced: serving the directories its paths name now", "queue", d.Path())
	})
	defer func() {
		if cerr := follow.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	ep, err := startEndpoints(ctx, hf, logger, metrics.New(), follow, l)
	if err != nil {
		return err
	}
	sigCtx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-sigCtx.Done()
	return ep.stop()
}
