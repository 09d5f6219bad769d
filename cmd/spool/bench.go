package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/internal/bench"
	"github.com/spoolq/spool/internal/cmdline"
)

var benchCommand = &cmdline.Command{
	Name:    "bench",
	Args:    "[--relay URL [--relay URL...] [--aggregates A] [--broker-pid PID]] [--n N] [--dup F] [--poison F] [--floor] [--rounds R] [--cold] [--syscalls] [--durability full|relaxed] [--handler post|exec --latency D --concurrency C [--procs P] [--db URL]] [--watch [--idle D] [--arrivals N --gap D] [--steady-rate N --steady D] [--poll D]]",
	Summary: "drain a generated queue and report throughput, latency, memory",
	Options: cmdline.New[benchOpts],
}

// benchOpts are spool bench's: the options of each of its measurements
// (a drain, --handler, --watch, --relay), of which validate picks one.
type benchOpts struct {
	o          bench.Options
	co         bench.CallOptions
	wo         bench.WatchOptions
	ro         bench.RelayOptions
	dbDelay    *time.Duration
	relays     stringList
	aggregates *int
	brokerPID  *int
	watch      *bool
	cpuprofile *string
	durability *string
	// calls is set for --handler.
	calls bool
}

func (b *benchOpts) Flags(flags *flag.FlagSet) {
	o, co, wo := &b.o, &b.co, &b.wo
	flags.IntVar(&o.N, "n", 10000, "messages to generate")
	flags.Float64Var(&o.DupFrac, "dup", 0.10, "fraction of redeliveries")
	flags.Float64Var(&o.PoisonFrac, "poison", 0.01, "fraction of poison messages")
	flags.Int64Var(&o.Seed, "seed", 1, "generator seed")
	flags.StringVar(&o.Parent, "tmp", "", "parent `DIR` of the temporary queues (default the system's temp dir)")
	flags.BoolVar(&o.Floor, "floor", false, "also run the floor loops and print the ratios")
	flags.IntVar(&o.Workers, "workers", 0, fmt.Sprintf("consumer workers (default %d per GOMAXPROCS)", spool.DefaultWorkersPerCPU))
	flags.IntVar(&o.Batch, "batch", 0, fmt.Sprintf("messages per ledger transaction (default %d; records of a --format file, %d)", spool.DefaultBatchSize, spool.DefaultRecordBatchSize))
	flags.IntVar(&o.Rounds, "rounds", 1, "measure `R` times, interleaved, and print the medians")
	flags.BoolVar(&o.Keep, "keep", false, "keep the temporary queues")
	flags.StringVar(&o.Format, "format", "", "write the messages as the records of one batch file, `jsonl` or `csv`, and drain it as a queue of batch files")
	flags.BoolVar(&o.Syscalls, "syscalls", false, "count the system calls per message (kernel tracepoint; as root)")
	flags.BoolVar(&o.Cold, "cold", false, "evict each generated queue's files from the page cache before its run, as for a backlog that sat on disk")
	flags.StringVar(&co.Handler, "handler", "", "measure an external handler, `post` or `exec`, instead of the plain drain")
	flags.DurationVar(&co.Latency, "latency", 20*time.Millisecond, "with --handler: how long each call takes, `DURATION`")
	flags.IntVar(&co.Concurrency, "concurrency", spool.DefaultConcurrency, "with --handler: calls at once per consumer, `C`")
	flags.IntVar(&co.Procs, "procs", 1, "with --handler: consumers, `P`; more than 1 runs spool consume processes")
	flags.StringVar(&co.DB, "db", "", "a PostgreSQL or MariaDB `URL` for the ledger (of the plain drain or of --handler), in a schema or database of the run's own (default: SQLite in the queue)")
	b.dbDelay = flags.Duration("db-delay", 0, "with --db: reach the server through a proxy that holds each chunk `DURATION` each way, as for a server on another host")
	flags.Var(&b.relays, "relay", "measure the outbox relay to `URL` against the broker's own client (repeatable)")
	b.aggregates = flags.Int("aggregates", 16, "with --relay: the events' aggregates, `A`")
	b.brokerPID = flags.Int("broker-pid", 0, "with one --relay: also the CPU per event of the broker, process `PID` on this machine")
	b.watch = flags.Bool("watch", false, "measure a watching consumer instead: idle CPU, and enqueue-to-done/ latency of arrivals one at a time and at a steady rate")
	flags.DurationVar(&wo.Idle, "idle", 10*time.Second, "with --watch: how long the idle consumer's CPU is measured, `DURATION`")
	flags.IntVar(&wo.Trickle, "arrivals", 200, "with --watch: messages arriving one at a time, `N`")
	flags.DurationVar(&wo.Gap, "gap", 50*time.Millisecond, "with --watch: the time between those arrivals, `DURATION`")
	flags.IntVar(&wo.Rate, "steady-rate", 5000, "with --watch: messages per second of the steady phase, `N`")
	flags.DurationVar(&wo.Steady, "steady", 5*time.Second, "with --watch: how long the steady phase lasts, `DURATION`")
	flags.DurationVar(&wo.Poll, "poll", 0, "with --watch: poll inbox/ every `INTERVAL` instead of waiting for notifications, for comparison")
	b.cpuprofile = flags.String("cpuprofile", "", "write a CPU profile of spool's drain (the first round's; with --handler, of this process during the drain) to `FILE` (go tool pprof)")
	b.durability = addDurabilityFlag(flags)
}

func (b *benchOpts) Validate(e *env, pos []string) (err error) {
	o := &b.o
	if err := e.Positionals(pos, 0, 0); err != nil {
		return err
	}
	if o.Relaxed, err = durability(e, *b.durability); err != nil {
		return err
	}
	if err := o.Check(); err != nil {
		return e.Usage("%v", err)
	}
	switch {
	case len(b.relays) > 0 || e.Given("aggregates"):
		b.ro = bench.RelayOptions{Targets: b.relays, N: o.N, Aggregates: *b.aggregates, Rounds: o.Rounds, Parent: o.Parent, BrokerPID: *b.brokerPID}
		return benchUsage(e, b.ro.Check(e.Given))
	case e.Given("broker-pid"):
		return e.Usage("--broker-pid goes with --relay URL")
	case *b.watch:
		return benchUsage(e, b.wo.Check(*o, e.Given))
	}
	if e.Given("db-delay") && (!e.Given("db") || *b.dbDelay <= 0) {
		return e.Usage("--db-delay wants --db and a duration above 0")
	}
	if b.co.Handler != "" || e.Given("latency") || e.Given("concurrency") || e.Given("procs") {
		b.calls = true
		return benchUsage(e, b.co.Check(*o))
	}
	if e.Given("db") && o.Relaxed {
		return e.Usage("--db measures a server's ledger, whose durability is its own: no relaxed durability")
	}
	return nil
}

// benchUsage words a refusal of package bench's checks as a usage error.
func benchUsage(e *env, err error) error {
	if err != nil {
		return e.Usage("%v", err)
	}
	return nil
}

func (b *benchOpts) Run(ctx context.Context, e *env) (err error) {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *b.watch { // --relay refuses it
		load := bench.LoadAverage()
		rep, err := bench.Watch(ctx, b.wo)
		if err != nil {
			return err
		}
		rep.Write(e.Stdout, load)
		return exact(rep.Exact())
	}
	if b.ro.Targets != nil {
		defer b.profile(&err)()
		if err != nil {
			return err
		}
		rep, err := bench.Relay(ctx, b.ro)
		if err != nil {
			return err
		}
		rep.Write(e.Stdout)
		return nil
	}
	if e.Given("db-delay") {
		through, stopProxy, err := bench.Delay(ctx, b.co.DB, *b.dbDelay)
		if err != nil {
			return e.Usage("%v", err)
		}
		defer func() {
			if perr := stopProxy(); perr != nil && err == nil {
				err = fmt.Errorf("bench: %w", perr)
			}
		}()
		b.co.DB = through
	}
	defer b.profile(&err)()
	if err != nil {
		return err
	}
	if b.calls {
		if b.co.Procs > 1 {
			if b.co.Exe, err = os.Executable(); err != nil {
				return fmt.Errorf("bench: %w", err)
			}
		}
		rep, err := bench.Calls(ctx, b.co)
		if err != nil {
			return err
		}
		rep.Write(e.Stdout, b.co)
		return exact(rep.Exact())
	}
	if e.Given("db") {
		b.o.DB = b.co.DB
	}
	rep, err := bench.Bench(ctx, b.o)
	if err != nil {
		return err
	}
	rep.Write(e.Stdout, b.o)
	return exact(rep.AllExact())
}

// profile creates --cpuprofile's file, when given, as every measurement's
// CPUProfile, setting *err when it cannot; the function it returns closes
// it, setting *err to a failure to close when it is nil.
func (b *benchOpts) profile(err *error) func() {
	if *b.cpuprofile == "" {
		return func() {}
	}
	f, cerr := os.Create(*b.cpuprofile)
	if cerr != nil {
		*err = fmt.Errorf("bench: %w", cerr)
		return func() {}
	}
	b.o.CPUProfile, b.co.CPUProfile, b.ro.CPUProfile = f, f, f
	return func() {
		if cerr := f.Close(); cerr != nil && *err == nil {
			*err = fmt.Errorf("bench: %w", cerr)
		}
	}
}

// exact is a measurement's end: errCheckFailed when its outcome counts
// were not the generated ones.
func exact(ok bool) error {
	if !ok {
		return errCheckFailed
	}
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}
