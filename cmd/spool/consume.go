package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/handler"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/task"
)

var consumeCommand = &cmdline.Command{
	Name:    "consume",
	Env:     true,
	Args:    "DIR [--watch] [--exec CMD | --sql FILE | --post URL] [FLAGS]",
	Groups:  consumeGroups,
	Summary: "drain inbox/ into the ledger (or keep consuming with --watch)",
	Options: cmdline.New[consumeOpts],
}

// consumeOpts are spool consume's: its many flags (consumeFlags).
type consumeOpts struct {
	dirOpts
	cfl     *consumeFlags
	relaxed bool
}

func (o *consumeOpts) Flags(fs *flag.FlagSet) { o.cfl = addConsumeFlags(fs) }

// validate checks every flag (consumeFlags.check) before the queue or
// the ledger is touched.
func (o *consumeOpts) Validate(e *env, pos []string) (err error) {
	if err := e.Positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	o.dir = pos[0]
	o.relaxed, err = o.cfl.check(e, e.FS)
	return err
}

func (o *consumeOpts) Run(ctx context.Context, e *env) error {
	cfl := o.cfl
	defer cfl.dedup.close()
	// The logger, the notifier and the progress bar write to stderr from
	// several goroutines. With --log-format json the command's warnings
	// and its final error are records of the logger too (see warn and
	// finish), so that every line of stderr is one object.
	terminal := isTerminal(e.Stderr)
	stderr := &stderrWriter{w: e.Stderr}
	e.Stderr = stderr
	logger := cfl.log.logger(stderr)
	if cfl.log.json() {
		e.Log = logger
	}
	// A SPOOL_ variable that is no setting is most likely a typo of one,
	// which would otherwise be ignored without a word.
	for _, line := range program.UnknownVars(os.Environ()) {
		e.Warn("%s", line)
	}
	// The clients' own lines too, in the same format.
	clientLogs.Use(logger)
	qo := cfl.options(e, o.relaxed, logger)
	debug := logger.Enabled(ctx, slog.LevelDebug)
	// A progress bar is for a person watching a drain: never with --watch,
	// which does not end, nor among JSON records.
	if bar := !*cfl.watch && *cfl.progress && terminal && !cfl.log.json(); bar {
		qo.OnDrain = func(backlog int) func() {
			if backlog < progressMin {
				return nil
			}
			stderr.startProgress(backlog)
			return stderr.stopProgress
		}
	}
	if qo.OnDrain != nil || debug {
		qo.OnDelivery = func(d *spool.Delivery, r spool.Result, stored string) {
			stderr.delivered()
			if debug {
				logDelivery(logger, d, r, stored)
			}
		}
	}
	qo.OnConfig = func(abs string, c spool.Contract, file, run *queueopen.Config) {
		queueopen.LogSettings(logger, abs, effectiveConfig(e.FS, e.FromEnv, &c, file, run))
	}
	st, err := queueopen.RunConsumer(ctx, o.dir, qo)
	if st != nil {
		fmt.Fprintf(e.Stdout, "processed=%d duplicates=%d dead-letters=%d recovered=%d\n",
			st.Processed, st.Duplicates, st.DeadLetters, st.Recovered)
		if *cfl.watch {
			fmt.Fprintf(e.Stdout, "rescans=%d overflows=%d\n", st.Rescans, st.Overflows)
		}
		if st.Deferred > 0 {
			fmt.Fprintf(e.Stdout, "waiting-retries=%d next-retry=%s\n", st.Deferred, st.NextRetry.UTC().Format(time.RFC3339))
		}
	}
	return consumeFailure(err, o.dir, *cfl.db)
}

// consumeFailure words an error of queueopen.RunConsumer for the command
// line: the ledger's refusals (ledgerFailure), a handler's option, a
// spool.conf approval section the ledger's policy contradicts, and format
// flags that cannot go together as usage errors.
func consumeFailure(err error, dir, db string) error {
	var oe *handler.OptionError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &oe):
		return optionUsage(nil, err)
	case errors.Is(err, task.ErrPolicyMismatch):
		return policyUsage(err)
	case errors.As(err, new(*queueopen.FormatFlagError)):
		return &cmdline.UsageError{Msg: err.Error()}
	}
	return ledgerFailure(err, dir, db)
}
