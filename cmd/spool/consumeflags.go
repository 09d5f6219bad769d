package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
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
// choice.
func (f *consumeFlags) check(e *env, fs *flag.FlagSet) (relaxed bool, err error) {
	switch {
	case *f.workers < 0:
		return false, e.usage("--workers %d: want 0 (default) or more", *f.workers)
	case *f.batch < 0:
		return false, e.usage("--batch %d: want 0 (default) or more", *f.batch)
	case *f.shutdownTimeout < 0:
		return false, e.usage("--shutdown-timeout %v: want 0 (no bound) or a positive duration", *f.shutdownTimeout)
	case *f.poll < 0 || (cmdline.Given(fs, "poll") && *f.poll == 0) || (*f.poll > 0 && !*f.watch):
		return false, e.usage("--poll %v: want a positive interval, with --watch", *f.poll)
	case *f.minAge < 0:
		return false, e.usage("--min-age %v: want 0 (off) or more", *f.minAge)
	case *f.lease < 3*time.Second:
		return false, e.usage("--lease %v: want 3s or more (it is renewed every third of it)", *f.lease)
	case cmdline.Given(fs, "auth") && f.listen.addr == "":
		return false, e.usage("--auth needs --listen: the API and the console are served at its address")
	}
	f.handler.Lease = *f.lease
	if relaxed, err = e.relaxed(*f.durability); err != nil {
		return false, err
	}
	for _, check := range []func(*env) error{f.format.check, f.handler.check, f.notify.check, f.log.check,
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
	return queueopen.ConsumeOptions{
		DB: *f.db, Relaxed: relaxed, NewLedger: *f.newLedger, Audit: cliAudit(),
		Override: f.contract.override(), Format: f.format.override(),
		Handler: f.handler.Options, Workers: *f.workers, BatchSize: *f.batch,
		Poll: *f.poll, MinAge: *f.minAge, Lease: *f.lease, Watch: *f.watch, ShutdownTimeout: *f.shutdownTimeout,
		Dedup: f.dedup.w, OnDeadLetter: f.notify.command, OnDeadLetterTimeout: f.notify.timeout,
		OnNotifyError: func(err error) { warnNotify(e, err) },
		Listen:        endpoint.ServeOptions{Addr: f.listen.addr, TLS: f.listen.tls, Refresh: f.listen.refresh},
		Tokens:        f.auth.tokens, SystemdNotify: true,
		Exit: func(sig os.Signal) {
			if sig == nil {
				os.Exit(exitShutdownTimeout)
			}
			os.Exit(exitSignalBase + int(sig.(syscall.Signal)))
		},
		Logger: logger, Operator: currentOperator().Identity(), Resume: runOptions(e),
		OnReplayFinished: startReports(e).OnReplayFinished, OnTempRemoved: startReports(e).OnTempRemoved,
		Warn: func(err error) { e.warn("%v", err) },
	}
}
