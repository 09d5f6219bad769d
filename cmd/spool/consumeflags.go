package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/endpoint"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/queueopen"
)

// consumeFlags are the flags of spool consume, which spool check takes
// too: what check reports is the configuration consume would run with.
type consumeFlags struct {
	watch           *bool
	poll, minAge    *time.Duration
	workers, batch  *int
	log             *logFlags
	progress        *bool
	durability      *string
	db              *string
	newLedger       *bool
	contract        *contractFlags
	format          *formatFlags
	handler         *handlerFlags
	notify          *notifyFlags
	shutdownTimeout *time.Duration
	listen          *listenFlags
	auth            *authFlag
	dedup           *dedupFlag
	lease           *time.Duration
	// run is the library's options of the flags, once check passed.
	run queueopen.ConsumeOptions
}

// addConsumeFlags registers consume's flags on fs.
func addConsumeFlags(fs *flag.FlagSet) *consumeFlags {
	f := &consumeFlags{}
	f.watch = fs.Bool("watch", false, "keep consuming new arrivals until SIGINT/SIGTERM")
	f.poll = fs.Duration("poll", 0, "with --watch: list inbox/ every `INTERVAL` instead of waiting for filesystem notifications (NFS, SMB)")
	f.minAge = fs.Duration("min-age", 0, "leave files in inbox/ until they have not changed for `DURATION` (producers that write in place)")
	f.workers = fs.Int("workers", 0, fmt.Sprintf("goroutines reading and parsing claimed messages in parallel (default %d per GOMAXPROCS)", spool.DefaultWorkersPerCPU))
	f.batch = fs.Int("batch", 0, fmt.Sprintf("most messages per ledger transaction (default %d; with --exec or --post 4 × --concurrency, 16 to %d, which bounds the claims held ahead of the calls to about 5 batches; records of a batch file without them, %d)", spool.DefaultBatchSize, spool.DefaultBatchSize, spool.DefaultRecordBatchSize))
	f.log = addLogFlags(fs)
	f.progress = fs.Bool("progress", true, "a progress bar on stderr for a drain of 1000 messages or more, when stderr is a terminal")
	f.durability = addDurabilityFlag(fs)
	f.db = addDBFlag(fs)
	f.newLedger = addNewLedgerFlag(fs)
	f.contract = addContractFlags(fs)
	f.format = addFormatFlags(fs)
	f.handler = addHandlerFlags(fs)
	f.notify = addNotifyFlags(fs)
	f.shutdownTimeout = fs.Duration("shutdown-timeout", queueopen.DefaultShutdownTimeout, "at SIGINT/SIGTERM, cancel the calls still running after `DURATION` and exit 4 (0: wait for them)")
	f.listen = addListenFlags(fs, "")
	f.auth = addAuthFlag(fs, ", with --listen, as spool serve --auth does")
	f.dedup = addDedupFlag(fs)
	f.lease = fs.Duration("lease", queue.DefaultLease, "how long (`DURATION`) this consumer's session stays alive without a renewal before another host takes its claims over (renewed every third; handler timeouts must stay under it)")
	return f
}

// consumeGroups are consume's flags by what they are for, in the order
// its help lists them (queueopen.SettingGroups, which check and the log
// show too).
var consumeGroups = func() []cmdline.FlagGroup {
	var out []cmdline.FlagGroup
	for _, g := range queueopen.SettingGroups {
		out = append(out, cmdline.FlagGroup{Title: g.Title, Names: g.Names})
	}
	return out
}()

// check validates the flags without touching the queue or the ledger, so
// that a bad command line changes nothing, and returns --durability's
// choice: the library's rules (queueopen.ConsumeOptions.Check, then
// CheckWork) with --durability between them, then the flags of the
// program alone. The options checked are kept for options.
func (f *consumeFlags) check(e *env, fs *flag.FlagSet) (relaxed bool, err error) {
	f.handler.UserAgent = "spool/" + strings.Fields(version())[0]
	f.run = queueopen.ConsumeOptions{
		DB: *f.db, NewLedger: *f.newLedger, Override: f.contract.override(), Format: f.format.override(),
		Handler: f.handler.Options, Workers: *f.workers, BatchSize: *f.batch,
		Poll: *f.poll, MinAge: *f.minAge, Lease: *f.lease, Watch: *f.watch, ShutdownTimeout: *f.shutdownTimeout,
		OnDeadLetter: f.notify.command, OnDeadLetterTimeout: f.notify.timeout,
		Listen: endpoint.ServeOptions{Addr: f.listen.addr},
		Given:  func(name string) bool { return cmdline.Given(fs, name) },
	}
	if err := f.run.Check(); err != nil {
		return false, optionUsage(e, err)
	}
	if relaxed, err = durability(e, *f.durability); err != nil {
		return false, err
	}
	if err := f.run.CheckWork(); err != nil {
		if errors.As(err, new(*queueopen.FormatFlagError)) {
			return false, e.Usage("%v", err)
		}
		return false, optionUsage(e, err)
	}
	for _, check := range []func(*env) error{f.log.check,
		func(e *env) error { return f.listen.check(e, false) }, f.auth.check, f.dedup.check} {
		if err := check(e); err != nil {
			return false, err
		}
	}
	return relaxed, nil
}

// exitSignalBase is added to a signal's number for the exit status of a
// second signal, which exits at once: 130 for SIGINT, 143 for SIGTERM, as a
// shell reports a process killed by them.
const exitSignalBase = 128

// options are the flags, checked, as the library's options of a run
// (queueopen.RunConsumer); relaxed is --durability's choice. What the
// run reports comes back as e's warnings, lines on stdout and records of
// logger.
func (f *consumeFlags) options(e *env, relaxed bool, logger *slog.Logger) queueopen.ConsumeOptions {
	o := f.run
	o.Relaxed, o.Audit = relaxed, cliAudit()
	o.Dedup, o.OnNotifyError = f.dedup.w, func(err error) { warnNotify(e, err) }
	o.Listen = endpoint.ServeOptions{Addr: f.listen.addr, TLS: f.listen.tls, Refresh: f.listen.refresh}
	o.Tokens, o.SystemdNotify = f.auth.tokens, true
	o.Exit = func(sig os.Signal) {
		if sig == nil {
			os.Exit(exitShutdownTimeout)
		}
		os.Exit(exitSignalBase + int(sig.(syscall.Signal)))
	}
	o.Logger, o.Operator, o.Resume = logger, currentOperator().Identity(), runOptions(e)
	o.OnReplayFinished, o.OnTempRemoved = startReports(e).OnReplayFinished, startReports(e).OnTempRemoved
	o.Warn = func(err error) { e.Warn("%v", err) }
	return o
}
