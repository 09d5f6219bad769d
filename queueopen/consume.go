package queueopen

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/endpoint"
	"github.com/spoolq/spool/handler"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/metrics"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/replay"
	"github.com/spoolq/spool/task"
	"github.com/spoolq/spool/window"
)

// ConsumeOptions are what one run of a queue's consumer is made of: the
// ledger, the contract and format over spool.conf, the handler and its
// retries, the services around the run (the dedup window, dead-letter
// notifications, the endpoints, systemd, signals), and the callbacks
// through which the program hears what happened (RunConsumer). spool consume fills it
// from its flags; an embedder fills what it needs. Each field's zero
// value is the default the field names.
type ConsumeOptions struct {
	// DB names the ledger, as Options.DB: "" for DIR/ledger.db.
	DB string
	// Relaxed: commits not fsynced by a backend that can (Options.Relaxed).
	Relaxed bool
	// NewLedger: accept a missing or empty ledger for a queue with
	// history (Options.NewLedger).
	NewLedger bool
	// Audit is who opens the queue, for a first bind (Options.Audit).
	Audit ledger.AuditEntry
	// Override changes the contract spool.conf gives (LoadContract).
	Override Override
	// Format is the batch format this run gives beside spool.conf's
	// (FormatOverride.Apply: refused where it contradicts a format
	// spool.conf sets). Nil: spool.conf's alone.
	Format FormatOverride

	// Handler is the business handler and its retries, already checked
	// (handler.Options.Check); its zero value records each message with
	// no business work. Built (handler.Options.Build) once the ledger is
	// open; a *handler.OptionError is returned as it is, for the program
	// to word as a usage error.
	Handler handler.Options
	// Workers, BatchSize, Poll, MinAge and Lease are spool.Config's
	// (Poll > 0 polls inbox/ every Poll); zero is the library's default.
	Workers, BatchSize  int
	Poll, MinAge, Lease time.Duration
	// Watch keeps consuming new arrivals until ctx is done or a signal
	// (Exit); false drains inbox/ and returns.
	Watch bool
	// ShutdownTimeout bounds the wait for the calls in flight at a stop
	// (spool.Config.ShutdownTimeout; DefaultShutdownTimeout is the
	// command line's); zero waits for them.
	ShutdownTimeout time.Duration

	// Dedup, when not nil, is the Redis dedup window in front of the
	// ledger (window.Open): RunConsumer gives it the queue's key prefix,
	// spool:QUEUE-ID:, so that queues sharing one Redis database never
	// see each other's msg_ids. The caller closes it.
	Dedup *window.Redis
	// OnDeadLetter, when not "", runs /bin/sh -c for each message that
	// lands in error/ (handler.NewNotifier), killed after
	// OnDeadLetterTimeout; before RunConsumer returns it waits for those
	// still running, at most two rounds of the timeout. Their failures
	// go to OnNotifyError.
	OnDeadLetter        string
	OnDeadLetterTimeout time.Duration
	OnNotifyError       func(error)
	// Listen, when its Addr is set, serves the run's metrics, health and
	// readiness there while it runs (endpoint.Serve: Addr, TLS and
	// Refresh are read, the rest is RunConsumer's); with Tokens also the API
	// and the console (NewConsole), its tasks run as Operator.
	Listen endpoint.ServeOptions
	Tokens task.Tokens
	// SystemdNotify tells systemd (NOTIFY_SOCKET, a Type=notify unit)
	// READY=1 once consuming began and STOPPING=1 at a signal; the
	// variable is taken out of the environment, so that the handlers
	// cannot speak for the service. A socket that fails is a Warn.
	SystemdNotify bool
	// Given, when set, reports whether the program's user gave an option
	// by the command line's flag name (poll, lease, auth,
	// on-dead-letter...), for the rules of Check and CheckWork about
	// options given empty; nil: none was.
	Given func(name string) bool
	// Exit, when set, makes RunConsumer handle SIGINT and SIGTERM: the first
	// stops the run gracefully (nothing more claimed, the work in flight
	// finished); a second calls Exit with it, as does (with nil) a stop
	// still going ShutdownGrace after ShutdownTimeout. Exit must end the
	// process: the library never does. Nil: the signals are the
	// program's, and the run stops when ctx is done.
	Exit func(os.Signal)

	// Logger receives the run's records; nil discards them.
	Logger *slog.Logger
	// Operator is who finishes the replays a killed run left
	// (task.Service.FinishReplays), with Resume's callbacks, and whom
	// the console's tasks act as.
	Operator task.Identity
	Resume   task.RunOptions
	// OnReplayFinished and OnTempRemoved are Start's (Options).
	OnReplayFinished func(replay.Finished)
	OnTempRemoved    func(queue.Temp)
	// Warn is told of what goes wrong beside the run without stopping it
	// (the systemd socket). Nil: dropped.
	Warn func(error)
	// OnDelivery, if set, is called for every message delivered
	// (spool.Config.OnDelivery), after the dead-letter notification.
	OnDelivery func(d *spool.Delivery, r spool.Result, stored string)
	// OnConfig, if set, is called once every check that may refuse the
	// run has passed, just before the consumer is made: with the queue's
	// absolute path, the contract, spool.conf as read (nil for none) and
	// as the run reads it (with Format), so that the program logs what it
	// runs with while a refusal stays the one line of its stderr.
	OnConfig func(queue string, c spool.Contract, file, run *Config)
	// OnDrain, if set, is called before a drain (not Watch) begins, with
	// the messages waiting in inbox/; the function it returns, if not
	// nil, is called when the drain ends (a progress bar).
	OnDrain func(backlog int) (done func())
}

// RunConsumer runs a consumer of the queue at dir, in one call, as spool
// consume does: it reads spool.conf strictly (LoadContract, o.Override,
// o.Format), opens and checks the ledger (Attach), builds the handler,
// holds the contract among the live consumers' (HoldContract), finishes
// what killed runs left (replays, through the task service, then Start),
// sets up the batch files, the dedup window, the notifications and the
// endpoints, and then drains inbox/ or, with o.Watch, consumes until ctx
// is done or a signal. Each step may refuse the run before anything is
// claimed, in this order, which decides which error a run with several
// mistakes reports.
//
// The Stats are nil when the run was refused before consuming began, and
// the counts of the run otherwise, also with an error (spool.Consumer's
// Drain and Watch). A handler that halted the run (handler.Halter) is a
// *handler.OptionError once the run is over.
func RunConsumer(ctx context.Context, dir string, o ConsumeOptions) (st *spool.Stats, err error) {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	warn := func(err error) {
		if o.Warn != nil {
			o.Warn(err)
		}
	}
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer CloseDir(d, &err)
	c, file, err := LoadContract(dir, o.Override)
	if err != nil {
		return nil, err
	}
	// The format the run reads: spool.conf's, or the flags' where it
	// sets none. file stays what spool.conf says, for OnConfig.
	conf, err := o.Format.Apply(file)
	if err != nil {
		return nil, err
	}
	UseFormat(d, conf)
	// The handlers and the notifier see the queue by its absolute path: a
	// program may change directory.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("queue path: %w", err)
	}
	l, err := Attach(ctx, d, Options{DB: o.DB, Use: Write, Relaxed: o.Relaxed, NewLedger: o.NewLedger, Audit: o.Audit})
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := l.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close ledger: %w", cerr)
		}
	}()
	hf := &o.Handler
	h, caller, err := hf.Build(ctx, l, abs)
	if err != nil {
		return nil, err
	}
	caller, stopper := hf.Halting(caller)
	hold, err := HoldContract(d, c, conf.format())
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := hold.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	// The replays killed runs left are finished first by the task
	// service, which audits it, then Start removes stale temp files.
	s := &task.Service{Dir: d, Ledger: l, Contract: spool.DefaultContract(), Host: queue.Host(), PID: os.Getpid()}
	if err := s.FinishReplays(ctx, o.Operator, o.Resume); err != nil {
		return nil, err
	}
	if err := Start(ctx, d, l, Options{OnReplayFinished: o.OnReplayFinished, OnTempRemoved: o.OnTempRemoved}); err != nil {
		return nil, err
	}
	cfg := spool.Config{
		Contract: c, Workers: o.Workers, BatchSize: o.BatchSize, Logger: logger, Relaxed: o.Relaxed,
		Handler: h, Caller: caller, Concurrency: hf.Concurrency, Ordered: hf.Ordered, Rate: hf.PerSecond(), PauseAfter: hf.PauseAfterConfig(),
		Retry: hf.Retry(), RetryWait: hf.RetryWait, ShutdownTimeout: o.ShutdownTimeout,
		Poll: o.Poll > 0, PollInterval: o.Poll, MinAge: o.MinAge, Lease: o.Lease,
	}
	// Batch files, or nil for JSON messages.
	if cfg.Batch, err = Batch(d, conf, c); err != nil {
		return nil, err
	}
	if o.Dedup != nil {
		if cfg.Window, err = dedupWindow(d, o.Dedup); err != nil {
			return nil, err
		}
	}
	var notify func(*spool.Delivery, spool.Result, string)
	if o.OnDeadLetter != "" {
		n := handler.NewNotifier(handler.NotifierOptions{
			Command: o.OnDeadLetter, Queue: abs, Timeout: o.OnDeadLetterTimeout, OnError: o.OnNotifyError,
		})
		// On the way out, wait for the notifications still queued or
		// running, at most for two rounds of them.
		defer func() {
			if err := n.Close(2 * o.OnDeadLetterTimeout); err != nil && o.OnNotifyError != nil {
				o.OnNotifyError(err)
			}
		}()
		notify = n.Deliver
	}
	if notify != nil || o.OnDelivery != nil {
		cfg.OnDelivery = func(d *spool.Delivery, r spool.Result, stored string) {
			if notify != nil {
				notify(d, r, stored)
			}
			if o.OnDelivery != nil {
				o.OnDelivery(d, r, stored)
			}
		}
	}
	if o.Listen.Addr != "" {
		m := metrics.New()
		cfg.Observer = m
		var more func(*http.ServeMux)
		if o.Tokens != nil {
			srv, err := NewConsole(ctx, dir, d, l, c, conf, o.Tokens, m, o.Listen.Refresh, o.Operator, logger)
			if err != nil {
				return nil, err
			}
			defer srv.Close()
			more = srv.Register
		}
		so := o.Listen
		so.Log, so.Metrics, so.Queue, so.Ledger, so.More = logger, m, d, l, more
		ep, err := endpoint.Serve(ctx, so)
		if err != nil {
			return nil, err
		}
		defer func() {
			if serr := ep.Stop(); serr != nil && err == nil {
				err = serr
			}
		}()
	}
	sd := &sdNotifier{}
	if o.SystemdNotify {
		sd = newSDNotifier(warn)
	}
	defer sd.close()
	cfg.OnStart = func() {
		sd.notify("READY=1", "STATUS=consuming "+abs)
	}
	if o.OnConfig != nil {
		o.OnConfig(abs, c, file, conf)
	}
	consumer, err := spool.NewConsumer(d, l.Consumer(), cfg)
	if err != nil {
		return nil, err
	}
	runCtx := ctx
	if o.Exit != nil {
		sigCtx, stop := stopOnSignal(ctx, logger, o.ShutdownTimeout, o.Exit, func() {
			sd.notify("STOPPING=1", "STATUS=stopping: finishing the work in flight")
		})
		defer stop()
		runCtx = sigCtx
	}
	runCtx, halt := context.WithCancel(runCtx)
	defer halt()
	if stopper != nil {
		stopper.Stops(halt)
	}
	var stats spool.Stats
	if o.Watch {
		warnNotTaken(d, logger)
		stats, err = consumer.Watch(runCtx)
	} else {
		defer warnNotTaken(d, logger)
		var done func()
		if o.OnDrain != nil {
			// The total is the backlog now; the count comes from
			// OnDelivery, so the consumer knows nothing of it.
			backlog, cerr := d.Count(queue.Inbox)
			if cerr != nil {
				return nil, cerr
			}
			done = o.OnDrain(backlog)
		}
		stats, err = consumer.Drain(runCtx)
		if done != nil {
			done()
		}
	}
	if stopper != nil && err == nil {
		err = stopper.Err()
	}
	return &stats, err
}

// warnNotTaken logs the entries of inbox/ that the queue never takes, if
// there are any: a producer's file under a name the queue does not read
// (an orders.csv.gz where only *.csv is included) would otherwise wait
// there for ever without a word. Once when a watch starts, and at the end
// of a drain, when inbox/ holds little else.
func warnNotTaken(d *queue.Dir, logger *slog.Logger) {
	st, err := d.Stats(queue.Inbox, false)
	if err != nil || st.NotTaken == 0 {
		return // the consumer says what is wrong with inbox/ itself
	}
	args := []any{"entries", st.NotTaken, "first", st.NotTakenNames}
	if hint := d.NotTakenHint(st.NotTakenNames); hint != "" {
		args = append(args, "hint", hint)
	}
	logger.Warn("inbox/ holds entries the queue never takes, not named as its messages are ("+d.MessageNamesRule()+")", args...)
}

// dedupWindow gives w the queue's key prefix and returns it. Its keys
// are spool:QUEUE-ID:MSG_ID, so that queues sharing one Redis database
// never see each other's msg_ids.
func dedupWindow(d *queue.Dir, w *window.Redis) (*window.Redis, error) {
	id, err := d.ID()
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, fmt.Errorf("dedup window: the queue has no identity yet")
	}
	w.SetPrefix("spool:" + id + ":")
	return w, nil
}

// OpenDir opens the queue directory at dir alone, as every command of
// the command line does before anything else: a directory that does not
// exist is not a queue (queue.ErrNotQueue, saying what creates one, as
// one that lacks a stage is), and a queue of batch files (spool.conf's
// format) names its messages by its format (UseFormat). A spool.conf
// that cannot be read is left to the caller's reading of the contract
// (LoadContract), or warned of: the directory opens as one of JSON
// messages. The caller closes it.
func OpenDir(dir string) (*queue.Dir, error) {
	d, err := queue.Open(dir)
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, queue.ErrNotQueue) {
		return nil, fmt.Errorf("open queue %s: %w: no such directory (create one with spool init)", dir, queue.ErrNotQueue)
	}
	if err != nil {
		return nil, err
	}
	if conf, cerr := ReadConfig(dir); cerr == nil {
		UseFormat(d, conf)
	}
	return d, nil
}

// CloseDir closes d, keeping the first error in *err: deferred by the
// operations that hold a queue open for their whole run, so that a failed
// close (the queue's directory handles) is reported when nothing else was.
func CloseDir(d *queue.Dir, err *error) {
	if cerr := d.Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("close queue: %w", cerr)
	}
}
