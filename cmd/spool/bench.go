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
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/relay"
)

var benchCommand = &command{
	name:    "bench",
	args:    "[--relay URL [--relay URL...] [--aggregates A]] [--n N] [--dup F] [--poison F] [--floor] [--rounds R] [--cold] [--durability full|relaxed] [--handler post|exec --latency D --concurrency C [--procs P] [--db URL]] [--watch [--idle D] [--arrivals N --gap D] [--steady-rate N --steady D] [--poll D]]",
	summary: "drain a generated queue and report throughput, latency, memory",
	help: `
Generates a queue of N realistic ~200-byte messages (with fractions of
redeliveries and poison) in a temporary directory, drains it durably, and
reports messages per second, the processor time per message (user and
system, all cores), p50/p99 time per message (claim to done/), peak RSS,
and the outcome counts against what was generated: a fast wrong
run shows as MISMATCH and exits 1. --floor also runs, in this process and
on the same filesystem, the least any consumer must do per message (rename
in, read, rename out; no parsing, no ledger, no fsync), once with package
os and once with dirfd-relative system calls, and prints spool's rate as a
ratio of each: the figure to quote, since absolute rates drift on shared
machines. --rounds R repeats the whole measurement R times, spool and the
floors interleaved, each round on freshly generated queues, and ends with
the medians of the rounds (of each round's own ratios, for the ratios).
--cold evicts each generated queue's files from the page cache before its
run, so that the messages are read from the disk, as they are when a
backlog has sat for a while. --format jsonl|csv writes the messages as the
records of one batch file instead (the same redeliveries and poison) and
drains it as a queue of that format; the floors still move a file a
message.

--handler post|exec measures consumers with an external handler instead:
post calls an HTTP endpoint in this process that answers after --latency;
exec runs "sleep LATENCY" through /bin/sh. Each of --procs consumers (1:
in this process; more: spool consume processes at once on one queue)
calls it --concurrency times at once. Reports msg/s, calls in flight (max
and mean), the ideal procs × concurrency / latency, processor time per
message (this process and the consumers), the outcome counts, and for exec
how many times a second this machine runs the command with no latency
(sh -c "sleep 0") at that concurrency, the ceiling for exec.
--db postgres://... or mysql://... puts the ledger (of the plain drain,
or of --handler) in a schema (a database on MariaDB) of the run's own on
that server, removed afterwards: each round gets a new one.

--relay URL measures the outbox relay instead, once per --relay given
(nats://..., amqp://..., kafka://...: the targets of spool relay): for
each, an outbox of --n events (default 5000 here) over --aggregates
aggregates (16) in a temporary SQLite ledger, relayed by spool relay's
code in this process, then the broker's official Go client (nats.go,
amqp091-go, franz-go) publishing the same documents with 256 in flight,
the ceiling; relay and client alternate which goes first by round. It
prints both rates, the ratio relay/client and the processor time per
event of each (this process's, over each part), and with --rounds R the
medians.

--watch measures a watching consumer instead (durable, SQLite), in this
process: its CPU over --idle with nothing arriving, then the latency from
the rename of each message into inbox/ to its file durably in done/ (the
bench fsyncs done/ after each move it is told of), for --arrivals messages
--gap apart and for --steady at --steady-rate a second: p50, p99, max. The
load average at the start is printed with them; --poll INTERVAL measures
polling instead of notifications.`,
}

func init() { benchCommand.run = runBench }

func runBench(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	var o bench.Options
	flags.IntVar(&o.N, "n", 10000, "messages to generate")
	flags.Float64Var(&o.DupFrac, "dup", 0.10, "fraction of redeliveries")
	flags.Float64Var(&o.PoisonFrac, "poison", 0.01, "fraction of poison messages")
	flags.Int64Var(&o.Seed, "seed", 1, "generator seed")
	flags.StringVar(&o.Parent, "tmp", "", "parent `DIR` of the temporary queues (default the system's temp dir)")
	flags.BoolVar(&o.Floor, "floor", false, "also run the floor loops and print the ratios")
	flags.IntVar(&o.Workers, "workers", 0, fmt.Sprintf("consumer workers (default %d per GOMAXPROCS)", spool.DefaultWorkersPerCPU))
	flags.IntVar(&o.Batch, "batch", 0, fmt.Sprintf("messages per ledger transaction (default %d)", spool.DefaultBatchSize))
	flags.IntVar(&o.Rounds, "rounds", 1, "measure `R` times, interleaved, and print the medians")
	flags.BoolVar(&o.Keep, "keep", false, "keep the temporary queues")
	flags.StringVar(&o.Format, "format", "", "write the messages as the records of one batch file, `jsonl` or `csv`, and drain it as a queue of batch files")
	flags.BoolVar(&o.Cold, "cold", false, "evict each generated queue's files from the page cache before its run, as for a backlog that sat on disk")
	var co bench.CallOptions
	flags.StringVar(&co.Handler, "handler", "", "measure an external handler, `post` or `exec`, instead of the plain drain")
	flags.DurationVar(&co.Latency, "latency", 20*time.Millisecond, "with --handler: how long each call takes, `DURATION`")
	flags.IntVar(&co.Concurrency, "concurrency", spool.DefaultConcurrency, "with --handler: calls at once per consumer, `C`")
	flags.IntVar(&co.Procs, "procs", 1, "with --handler: consumers, `P`; more than 1 runs spool consume processes")
	flags.StringVar(&co.DB, "db", "", "a PostgreSQL or MariaDB `URL` for the ledger (of the plain drain or of --handler), in a schema or database of the run's own (default: SQLite in the queue)")
	dbDelay := flags.Duration("db-delay", 0, "with --db: reach the server through a proxy that holds each chunk `DURATION` each way, as for a server on another host")
	var relays stringList
	flags.Var(&relays, "relay", "measure the outbox relay to `URL` against the broker's own client (repeatable)")
	aggregates := flags.Int("aggregates", 16, "with --relay: the events' aggregates, `A`")
	watch := flags.Bool("watch", false, "measure a watching consumer instead: idle CPU, and enqueue-to-done/ latency of arrivals one at a time and at a steady rate")
	var wo bench.WatchOptions
	flags.DurationVar(&wo.Idle, "idle", 10*time.Second, "with --watch: how long the idle consumer's CPU is measured, `DURATION`")
	flags.IntVar(&wo.Trickle, "arrivals", 200, "with --watch: messages arriving one at a time, `N`")
	flags.DurationVar(&wo.Gap, "gap", 50*time.Millisecond, "with --watch: the time between those arrivals, `DURATION`")
	flags.IntVar(&wo.Rate, "steady-rate", 5000, "with --watch: messages per second of the steady phase, `N`")
	flags.DurationVar(&wo.Steady, "steady", 5*time.Second, "with --watch: how long the steady phase lasts, `DURATION`")
	flags.DurationVar(&wo.Poll, "poll", 0, "with --watch: poll inbox/ every `INTERVAL` instead of waiting for notifications, for comparison")
	cpuprofile := flags.String("cpuprofile", "", "write a CPU profile of spool's drain (the first round's; with --handler, of this process during the drain) to `FILE` (go tool pprof)")
	durability := addDurabilityFlag(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 0, 0); err != nil {
		return err
	}
	if o.Relaxed, err = e.relaxed(*durability); err != nil {
		return err
	}
	if o.N < 1 || o.DupFrac < 0 || o.PoisonFrac < 0 || o.DupFrac+o.PoisonFrac > 1 {
		return e.usage("want --n >= 1 and fractions >= 0 that sum to at most 1")
	}
	if o.Rounds < 1 {
		return e.usage("want --rounds >= 1")
	}
	if o.Format != "" && o.Format != "jsonl" && o.Format != "csv" {
		return e.usage("--format %q: want jsonl or csv", o.Format)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	set := map[string]bool{}
	flags.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if len(relays) > 0 || set["aggregates"] {
		ro := bench.RelayOptions{Targets: relays, N: o.N, Aggregates: *aggregates, Rounds: o.Rounds, Parent: o.Parent}
		if *cpuprofile != "" {
			f, err := os.Create(*cpuprofile)
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			defer func() {
				if cerr := f.Close(); cerr != nil && err == nil {
					err = fmt.Errorf("bench: %w", cerr)
				}
			}()
			ro.CPUProfile = f
		}
		return benchRelay(ctx, e, set, ro)
	}
	if *watch {
		for _, name := range []string{"handler", "latency", "concurrency", "procs", "db", "db-delay", "cpuprofile"} {
			if set[name] {
				return e.usage("--%s is not for --watch, which measures a watching consumer without a handler", name)
			}
		}
		return benchWatch(ctx, e, o, wo)
	}
	if set["db-delay"] {
		if !set["db"] || *dbDelay <= 0 {
			return e.usage("--db-delay wants --db and a duration above 0")
		}
		through, stopProxy, err := bench.Delay(ctx, co.DB, *dbDelay)
		if err != nil {
			return e.usage("%v", err)
		}
		defer func() {
			if perr := stopProxy(); perr != nil && err == nil {
				err = fmt.Errorf("bench: %w", perr)
			}
		}()
		co.DB = through
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer func() {
			if cerr := f.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("bench: %w", cerr)
			}
		}()
		o.CPUProfile, co.CPUProfile = f, f
	}
	if co.Handler != "" || set["latency"] || set["concurrency"] || set["procs"] {
		return benchCalls(ctx, e, o, co)
	}
	if set["db"] {
		if o.Relaxed {
			return e.usage("--db measures a server's ledger, whose durability is its own: no relaxed durability")
		}
		o.DB = co.DB
	}
	rep, err := bench.Bench(ctx, o)
	if err != nil {
		return err
	}
	w := e.stdout
	mode := "full"
	if o.Relaxed {
		mode = "relaxed"
	}
	engine := ledger.FileScheme
	if scheme, _, ok := strings.Cut(o.DB, "://"); ok {
		engine = scheme
	}
	format := "a file each"
	if o.Format != "" {
		format = "records of one " + o.Format + " file"
	}
	fmt.Fprintf(w, "messages   %d (%.0f%% redeliveries, %.0f%% poison, seed %d), %s, durability %s, ledger %s\n",
		o.N, o.DupFrac*100, o.PoisonFrac*100, o.Seed, format, mode, engine)
	for i, round := range rep.Rounds {
		if len(rep.Rounds) > 1 {
			fmt.Fprintf(w, "round      %d of %d\n", i+1, len(rep.Rounds))
		}
		fmt.Fprintf(w, "spool      %8.0f msg/s  %8s  cpu %5.1fµs/msg  p50 %s  p99 %s\n",
			round.Spool.Rate(), round.Spool.Elapsed.Round(time.Millisecond), micros(round.Spool.CPUPerMessage()),
			round.Spool.P50.Round(time.Microsecond), round.Spool.P99.Round(time.Microsecond))
		if round.Spool.ServerSeen {
			fmt.Fprintf(w, "server     cpu %5.1fµs/msg (the PostgreSQL backends of the --db database on this machine, any client's, during the drain)\n",
				micros(round.Spool.ServerCPU/time.Duration(max(round.Spool.N, 1))))
		}
		verdict := "exact"
		if !rep.Exact(round) {
			verdict = "MISMATCH"
		}
		fmt.Fprintf(w, "outcomes   processed=%d duplicates=%d dead-letters=%d (expected %d/%d/%d: %s)\n",
			round.Got.Processed, round.Got.Duplicates, round.Got.DeadLetters,
			rep.Expected.Unique, rep.Expected.Duplicates, rep.Expected.DeadLetters, verdict)
		fmt.Fprintf(w, "disk       cold reads=%d read-ahead=%d (messages found outside the page cache when read, before claimed)\n",
			round.Got.ColdReads, round.Got.ReadAhead)
		for j, f := range round.Floors {
			fmt.Fprintf(w, "%-14s %8.0f msg/s  %8s  cpu %5.1fµs/msg  spool/floor %.2f\n",
				f.Name, f.Rate(), f.Elapsed.Round(time.Millisecond), micros(f.CPUPerMessage()), round.Ratio(j))
		}
	}
	if len(rep.Rounds) > 1 {
		fmt.Fprintf(w, "median of %d rounds: spool %.0f msg/s  cpu %.1fµs/msg", len(rep.Rounds),
			rep.Median(func(r bench.Round) float64 { return r.Spool.Rate() }),
			rep.Median(func(r bench.Round) float64 { return micros(r.Spool.CPUPerMessage()) }))
		for j, f := range rep.Rounds[0].Floors {
			fmt.Fprintf(w, "  spool/%s %.2f", f.Name,
				rep.Median(func(r bench.Round) float64 { return r.Ratio(j) }))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "peak RSS   %.1f MiB\n", float64(rep.PeakRSS)/(1<<20))
	if !rep.AllExact() {
		return errCheckFailed
	}
	return nil
}

// benchCalls is bench --handler.
func benchCalls(ctx context.Context, e *env, o bench.Options, co bench.CallOptions) error {
	switch {
	case co.Handler != "post" && co.Handler != "exec":
		if co.Handler == "" {
			return e.usage("--latency, --concurrency and --procs measure a handler: add --handler post or --handler exec")
		}
		return e.usage("--handler %q: want post or exec", co.Handler)
	case co.Latency <= 0:
		return e.usage("--latency %v: want a positive duration", co.Latency)
	case co.Concurrency < 1 || co.Concurrency > maxConcurrency:
		return checkConcurrency(e, co.Concurrency)
	case co.Procs < 1:
		return e.usage("--procs %d: want 1 or more consumers", co.Procs)
	case o.Floor || o.Rounds > 1 || o.Cold || o.Relaxed:
		return e.usage("--handler measures one durable run: no --floor, --rounds, --cold or relaxed durability")
	}
	co.N, co.DupFrac, co.PoisonFrac, co.Seed, co.Parent, co.Keep, co.Batch = o.N, o.DupFrac, o.PoisonFrac, o.Seed, o.Parent, o.Keep, o.Batch
	if co.Procs > 1 {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		co.Exe = exe
	}
	rep, err := bench.Calls(ctx, co)
	if err != nil {
		return err
	}
	w := e.stdout
	// The ledger named by --db's scheme; the queue's own file without it.
	engine := ledger.FileScheme
	if scheme, _, ok := strings.Cut(co.DB, "://"); ok {
		engine = scheme
	}
	fmt.Fprintf(w, "messages   %d (%.0f%% redeliveries, %.0f%% poison, seed %d), --%s, latency %v, concurrency %d, processes %d, ledger %s\n",
		co.N, co.DupFrac*100, co.PoisonFrac*100, co.Seed, co.Handler, co.Latency, co.Concurrency, co.Procs, engine)
	fmt.Fprintf(w, "spool      %8.0f msg/s  %8s  cpu %5.1fµs/msg\n",
		rep.Run.Rate(), rep.Run.Elapsed.Round(time.Millisecond), micros(rep.Run.CPUPerMessage()))
	processed := float64(rep.Got.Processed) / rep.Run.Elapsed.Seconds()
	fmt.Fprintf(w, "calls      %8.0f processed/s, ideal %.0f/s (procs × concurrency / latency): %.2f of it\n",
		processed, rep.Ideal, processed/rep.Ideal)
	if rep.MaxInFlight >= 0 {
		fmt.Fprintf(w, "in flight  max %d  mean %.1f  (%d calls)\n", rep.MaxInFlight, rep.MeanInFlight, rep.Calls)
	} else {
		fmt.Fprintf(w, "in flight  not measured for exec in several processes\n")
	}
	if co.Handler == "exec" {
		fmt.Fprintf(w, "ceiling    %8.0f /s: sh -c \"sleep 0\" at concurrency %d, this machine's most for the command; %.2f of it\n",
			rep.StartRate, co.Concurrency, processed/min(rep.StartRate, rep.Ideal))
	}
	verdict := "exact"
	if !rep.Exact() {
		verdict = "MISMATCH"
	}
	fmt.Fprintf(w, "outcomes   processed=%d duplicates=%d dead-letters=%d (expected %d/%d/%d: %s)\n",
		rep.Got.Processed, rep.Got.Duplicates, rep.Got.DeadLetters,
		rep.Expected.Unique, rep.Expected.Duplicates, rep.Expected.DeadLetters, verdict)
	if !rep.Exact() {
		return errCheckFailed
	}
	return nil
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// benchWatch is bench --watch.
func benchWatch(ctx context.Context, e *env, o bench.Options, wo bench.WatchOptions) error {
	switch {
	case wo.Idle <= 0 || wo.Gap <= 0 || wo.Steady <= 0:
		return e.usage("--idle, --gap and --steady want positive durations")
	case wo.Trickle < 1 || wo.Rate < 1:
		return e.usage("want --arrivals >= 1 and --steady-rate >= 1")
	case wo.Poll < 0:
		return e.usage("--poll %v: want a positive interval", wo.Poll)
	case o.Floor || o.Rounds > 1 || o.Cold || o.Relaxed:
		return e.usage("--watch measures one durable run: no --floor, --rounds, --cold or relaxed durability")
	}
	wo.Parent, wo.Keep = o.Parent, o.Keep
	load := loadAverage()
	rep, err := bench.Watch(ctx, wo)
	if err != nil {
		return err
	}
	w := e.stdout
	mode := "notifications"
	if wo.Poll > 0 {
		mode = fmt.Sprintf("polling every %v", wo.Poll)
	}
	fmt.Fprintf(w, "watch      %s, durability full, ledger sqlite; load average at start %s\n", mode, load)
	fmt.Fprintf(w, "idle       cpu %.3f%% of a core over %v (%d rescans)\n", rep.IdleCPU*100, wo.Idle, rep.IdleRescans)
	for _, p := range []struct {
		name string
		l    bench.Latency
	}{{fmt.Sprintf("one/%v", wo.Gap), rep.Trickle}, {fmt.Sprintf("%d/s", wo.Rate), rep.Steady}} {
		fmt.Fprintf(w, "%-10s %6d msgs at %7.0f/s  p50 %8s  p99 %8s  max %8s  (rename into inbox/ to durable in done/)\n",
			p.name, p.l.N, p.l.RateOffered, p.l.P50.Round(10*time.Microsecond), p.l.P99.Round(10*time.Microsecond), p.l.Max.Round(10*time.Microsecond))
	}
	missing := rep.Trickle.Missing + rep.Steady.Missing
	fmt.Fprintf(w, "outcomes   processed=%d duplicates=%d dead-letters=%d missing=%d passes=%d rescans=%d overflows=%d\n",
		rep.Stats.Processed, rep.Stats.Duplicates, rep.Stats.DeadLetters, missing, rep.Stats.Passes, rep.Stats.Rescans, rep.Stats.Overflows)
	if missing > 0 || rep.Stats.Processed != rep.Trickle.N+rep.Steady.N || rep.Stats.Duplicates+rep.Stats.DeadLetters > 0 {
		return errCheckFailed
	}
	return nil
}

// loadAverage is the machine's 1, 5 and 15 minute load averages: latencies
// measured on a shared machine mean little without them.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// benchRelay is bench --relay.
func benchRelay(ctx context.Context, e *env, set map[string]bool, o bench.RelayOptions) error {
	for _, name := range []string{"dup", "poison", "seed", "floor", "workers", "batch", "keep", "cold", "handler", "latency",
		"concurrency", "procs", "db", "db-delay", "watch", "durability"} {
		if set[name] {
			return e.usage("--%s is not for --relay, which measures the outbox relay against a broker's client", name)
		}
	}
	switch {
	case len(o.Targets) == 0:
		return e.usage("--aggregates goes with --relay URL")
	case o.Aggregates < 1:
		return e.usage("--aggregates %d: want 1 or more", o.Aggregates)
	}
	if !set["n"] {
		o.N = 5000
	}
	for _, t := range o.Targets {
		scheme, _, _ := strings.Cut(t, "://")
		if scheme != "nats" && scheme != "amqp" && scheme != "amqps" && scheme != "kafka" {
			return e.usage("--relay %s: want nats://, amqp:// or kafka://, whose official clients are the ceiling", relay.Redact(t))
		}
	}
	rep, err := bench.Relay(ctx, o)
	if err != nil {
		return err
	}
	w := e.stdout
	fmt.Fprintf(w, "relay      %d events over %d aggregates, SQLite ledger; client: the official one, %d in flight\n", o.N, o.Aggregates, bench.ClientWindow)
	line := func(r bench.RelayRound) {
		fmt.Fprintf(w, "%-10s relay %7.0f ev/s cpu %5.1fµs/ev   client %7.0f ev/s cpu %5.1fµs/ev   relay/client %.2f\n",
			scheme(r.Target), r.Relay.Rate(), micros(r.Relay.CPUPerMessage()), r.Client.Rate(), micros(r.Client.CPUPerMessage()), r.Ratio())
	}
	for i, round := range rep.Rounds {
		if len(rep.Rounds) > 1 {
			fmt.Fprintf(w, "round      %d of %d\n", i+1, len(rep.Rounds))
		}
		for _, r := range round {
			line(r)
		}
	}
	if len(rep.Rounds) > 1 {
		fmt.Fprintf(w, "median of %d rounds\n", len(rep.Rounds))
		for j, r := range rep.Rounds[0] {
			fmt.Fprintf(w, "%-10s relay %7.0f ev/s cpu %5.1fµs/ev   client %7.0f ev/s cpu %5.1fµs/ev   relay/client %.2f\n", scheme(r.Target),
				rep.Median(j, func(r bench.RelayRound) float64 { return r.Relay.Rate() }),
				rep.Median(j, func(r bench.RelayRound) float64 { return micros(r.Relay.CPUPerMessage()) }),
				rep.Median(j, func(r bench.RelayRound) float64 { return r.Client.Rate() }),
				rep.Median(j, func(r bench.RelayRound) float64 { return micros(r.Client.CPUPerMessage()) }),
				rep.Median(j, bench.RelayRound.Ratio))
		}
	}
	return nil
}

// scheme is a target's scheme, for bench's table.
func scheme(target string) string {
	s, _, _ := strings.Cut(target, "://")
	return s
}
