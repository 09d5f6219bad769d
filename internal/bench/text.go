package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spoolq/spool/ledger"
)

// The reports as spool bench prints them, one measurement a line. Each
// Write is given the options its run was made with, which its first
// line states.

// Write writes r, the outcome of Bench(o): what was generated and how it
// was drained, then per round spool's rate, CPU and latencies, the
// outcome counts against the generated ones (exact or MISMATCH), the cold
// reads and the floors with spool's ratio to each; with several rounds
// their medians; then the peak RSS.
func (r Report) Write(w io.Writer, o Options) {
	mode := "full"
	if o.Relaxed {
		mode = "relaxed"
	}
	format := "a file each"
	if o.Format != "" {
		format = "records of one " + o.Format + " file"
	}
	fmt.Fprintf(w, "messages   %d (%.0f%% redeliveries, %.0f%% poison, seed %d), %s, durability %s, ledger %s\n",
		o.N, o.DupFrac*100, o.PoisonFrac*100, o.Seed, format, mode, engine(o.DB))
	for i, round := range r.Rounds {
		if len(r.Rounds) > 1 {
			fmt.Fprintf(w, "round      %d of %d\n", i+1, len(r.Rounds))
		}
		fmt.Fprintf(w, "spool      %8.0f msg/s  %8s  cpu %5.1fµs/msg%s  p50 %s  p99 %s\n",
			round.Spool.Rate(), round.Spool.Elapsed.Round(time.Millisecond), micros(round.Spool.CPUPerMessage()),
			syscallsText(round.Spool), round.Spool.P50.Round(time.Microsecond), round.Spool.P99.Round(time.Microsecond))
		if round.Spool.ServerSeen {
			fmt.Fprintf(w, "server     cpu %5.1fµs/msg (the PostgreSQL backends of the --db database on this machine, any client's, during the drain)\n",
				micros(round.Spool.ServerCPU/time.Duration(max(round.Spool.N, 1))))
		}
		fmt.Fprintf(w, "outcomes   processed=%d duplicates=%d dead-letters=%d (expected %d/%d/%d: %s)\n",
			round.Got.Processed, round.Got.Duplicates, round.Got.DeadLetters,
			r.Expected.Unique, r.Expected.Duplicates, r.Expected.DeadLetters, verdict(r.Exact(round)))
		fmt.Fprintf(w, "disk       cold reads=%d read-ahead=%d (messages found outside the page cache when read, before claimed)\n",
			round.Got.ColdReads, round.Got.ReadAhead)
		for j, f := range round.Floors {
			fmt.Fprintf(w, "%-14s %8.0f msg/s  %8s  cpu %5.1fµs/msg%s  spool/floor %.2f\n",
				f.Name, f.Rate(), f.Elapsed.Round(time.Millisecond), micros(f.CPUPerMessage()), syscallsText(f), round.Ratio(j))
		}
	}
	if len(r.Rounds) > 1 {
		fmt.Fprintf(w, "median of %d rounds: spool %.0f msg/s  cpu %.1fµs/msg", len(r.Rounds),
			r.Median(func(r Round) float64 { return r.Spool.Rate() }),
			r.Median(func(r Round) float64 { return micros(r.Spool.CPUPerMessage()) }))
		if r.Rounds[0].Spool.SyscallsSeen {
			fmt.Fprintf(w, "  syscalls %.1f/msg", r.Median(func(r Round) float64 { return r.Spool.SyscallsPerMessage() }))
		}
		for j, f := range r.Rounds[0].Floors {
			fmt.Fprintf(w, "  spool/%s %.2f", f.Name,
				r.Median(func(r Round) float64 { return r.Ratio(j) }))
		}
		fmt.Fprintln(w)
		// The floors' own medians: spool's CPU and system calls a message
		// are read against them, measured in the same rounds.
		for j, f := range r.Rounds[0].Floors {
			fmt.Fprintf(w, "median of %d rounds: %s %.0f msg/s  cpu %.1fµs/msg", len(r.Rounds), f.Name,
				r.Median(func(r Round) float64 { return r.Floors[j].Rate() }),
				r.Median(func(r Round) float64 { return micros(r.Floors[j].CPUPerMessage()) }))
			if f.SyscallsSeen {
				fmt.Fprintf(w, "  syscalls %.1f/msg", r.Median(func(r Round) float64 { return r.Floors[j].SyscallsPerMessage() }))
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "peak RSS   %.1f MiB\n", float64(r.PeakRSS)/(1<<20))
	if r.SyscallsNote != "" {
		fmt.Fprintf(w, "syscalls   not counted: %s\n", strings.TrimPrefix(r.SyscallsNote, "count system calls: "))
	}
}

// syscallsText is a run's system calls per message, as a column of its
// line, when they were counted.
func syscallsText(r Run) string {
	if !r.SyscallsSeen {
		return ""
	}
	return fmt.Sprintf("  syscalls %4.1f/msg", r.SyscallsPerMessage())
}

// Write writes r, the outcome of Calls(o): the run's parameters, spool's
// rate, the calls processed a second against the ideal, the calls in
// flight, for exec the machine's ceiling, and the outcome counts.
func (r CallReport) Write(w io.Writer, o CallOptions) {
	format := "a file each"
	if o.Format != "" {
		format = "records of one " + o.Format + " file"
	}
	fmt.Fprintf(w, "messages   %d (%.0f%% redeliveries, %.0f%% poison, seed %d; %s), --%s, latency %v, concurrency %d, processes %d, ledger %s\n",
		o.N, o.DupFrac*100, o.PoisonFrac*100, o.Seed, format, o.Handler, o.Latency, o.Concurrency, o.Procs, engine(o.DB))
	fmt.Fprintf(w, "spool      %8.0f msg/s  %8s  cpu %5.1fµs/msg\n",
		r.Run.Rate(), r.Run.Elapsed.Round(time.Millisecond), micros(r.Run.CPUPerMessage()))
	processed := float64(r.Got.Processed) / r.Run.Elapsed.Seconds()
	fmt.Fprintf(w, "calls      %8.0f processed/s, ideal %.0f/s (procs × concurrency / latency): %.2f of it\n",
		processed, r.Ideal, processed/r.Ideal)
	if r.MaxInFlight >= 0 {
		fmt.Fprintf(w, "in flight  max %d  mean %.1f  (%d calls)\n", r.MaxInFlight, r.MeanInFlight, r.Calls)
	} else {
		fmt.Fprintf(w, "in flight  not measured for exec in several processes\n")
	}
	if o.Handler == "exec" {
		fmt.Fprintf(w, "ceiling    %8.0f /s: sh -c \"sleep 0\" at concurrency %d, this machine's most for the command; %.2f of it\n",
			r.StartRate, o.Concurrency, processed/min(r.StartRate, r.Ideal))
	}
	fmt.Fprintf(w, "outcomes   processed=%d duplicates=%d dead-letters=%d (expected %d/%d/%d: %s)\n",
		r.Got.Processed, r.Got.Duplicates, r.Got.DeadLetters,
		r.Expected.Unique, r.Expected.Duplicates, r.Expected.DeadLetters, verdict(r.Exact()))
}

// Exact reports whether every message arrived in done/ once, processed:
// none missing, no duplicate, no dead letter.
func (r WatchReport) Exact() bool {
	missing := r.Trickle.Missing + r.Steady.Missing
	return missing == 0 && r.Stats.Processed == r.Trickle.N+r.Steady.N && r.Stats.Duplicates+r.Stats.DeadLetters == 0
}

// Write writes r, the outcome of Watch(r.Options): how it watched and
// the load average at the start (load, LoadAverage's), the idle CPU, the
// latencies of each phase, and the outcome counts.
func (r WatchReport) Write(w io.Writer, load string) {
	o := r.Options
	mode := "notifications"
	if o.Poll > 0 {
		mode = fmt.Sprintf("polling every %v", o.Poll)
	}
	fmt.Fprintf(w, "watch      %s, durability full, ledger sqlite; load average at start %s\n", mode, load)
	fmt.Fprintf(w, "idle       cpu %.3f%% of a core over %v (%d rescans)\n", r.IdleCPU*100, o.Idle, r.IdleRescans)
	for _, p := range []struct {
		name string
		l    Latency
	}{{fmt.Sprintf("one/%v", o.Gap), r.Trickle}, {fmt.Sprintf("%d/s", o.Rate), r.Steady}} {
		fmt.Fprintf(w, "%-10s %6d msgs at %7.0f/s  p50 %8s  p99 %8s  max %8s  (rename into inbox/ to durable in done/)\n",
			p.name, p.l.N, p.l.RateOffered, p.l.P50.Round(10*time.Microsecond), p.l.P99.Round(10*time.Microsecond), p.l.Max.Round(10*time.Microsecond))
	}
	fmt.Fprintf(w, "outcomes   processed=%d duplicates=%d dead-letters=%d missing=%d passes=%d rescans=%d overflows=%d\n",
		r.Stats.Processed, r.Stats.Duplicates, r.Stats.DeadLetters, r.Trickle.Missing+r.Steady.Missing, r.Stats.Passes, r.Stats.Rescans, r.Stats.Overflows)
}

// Write writes r, the outcome of Relay(r.Options): per round and target
// the relay's and the client's rates and CPU and their ratio, then with
// several rounds the medians.
func (r RelayReport) Write(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "relay      %d events over %d aggregates, SQLite ledger; client: the official one, %d in flight\n", o.N, o.Aggregates, ClientWindow)
	for i, round := range r.Rounds {
		if len(r.Rounds) > 1 {
			fmt.Fprintf(w, "round      %d of %d\n", i+1, len(r.Rounds))
		}
		for _, rr := range round {
			fmt.Fprintf(w, "%-10s relay %7.0f ev/s cpu %5.1fµs/ev   client %7.0f ev/s cpu %5.1fµs/ev   relay/client %.2f\n",
				scheme(rr.Target), rr.Relay.Rate(), micros(rr.Relay.CPUPerMessage()), rr.Client.Rate(), micros(rr.Client.CPUPerMessage()), rr.Ratio())
			if rr.Relay.ServerSeen && rr.Client.ServerSeen {
				fmt.Fprintf(w, "%-10s broker cpu with the relay %5.1fµs/ev, with the client %5.1fµs/ev\n", "", brokerMicros(rr.Relay), brokerMicros(rr.Client))
			}
		}
	}
	if len(r.Rounds) > 1 {
		fmt.Fprintf(w, "median of %d rounds\n", len(r.Rounds))
		for j, rr := range r.Rounds[0] {
			fmt.Fprintf(w, "%-10s relay %7.0f ev/s cpu %5.1fµs/ev   client %7.0f ev/s cpu %5.1fµs/ev   relay/client %.2f\n", scheme(rr.Target),
				r.Median(j, func(r RelayRound) float64 { return r.Relay.Rate() }),
				r.Median(j, func(r RelayRound) float64 { return micros(r.Relay.CPUPerMessage()) }),
				r.Median(j, func(r RelayRound) float64 { return r.Client.Rate() }),
				r.Median(j, func(r RelayRound) float64 { return micros(r.Client.CPUPerMessage()) }),
				r.Median(j, RelayRound.Ratio))
			if r.brokerSeen(j) {
				fmt.Fprintf(w, "%-10s broker cpu with the relay %5.1fµs/ev, with the client %5.1fµs/ev\n", "",
					r.Median(j, func(r RelayRound) float64 { return brokerMicros(r.Relay) }),
					r.Median(j, func(r RelayRound) float64 { return brokerMicros(r.Client) }))
			}
		}
	}
}

// brokerSeen reports whether every round saw the broker's CPU for
// target j, both parts: the median of the others would mix in zeros.
func (r RelayReport) brokerSeen(j int) bool {
	for _, round := range r.Rounds {
		if !round[j].Relay.ServerSeen || !round[j].Client.ServerSeen {
			return false
		}
	}
	return true
}

// brokerMicros is the broker's CPU per event of r, in µs.
func brokerMicros(r Run) float64 {
	return micros(r.ServerCPU / time.Duration(max(r.N, 1)))
}

// LoadAverage is the machine's 1, 5 and 15 minute load averages
// ("unknown" when /proc does not say): latencies measured on a shared
// machine mean little without them.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// engine is the ledger a --db URL names, by its scheme; the queue's own
// file without one.
func engine(db string) string {
	if scheme, _, ok := strings.Cut(db, "://"); ok {
		return scheme
	}
	return ledger.FileScheme
}

// scheme is a target's scheme, for the relay's table.
func scheme(target string) string {
	s, _, _ := strings.Cut(target, "://")
	return s
}

// verdict says whether outcome counts were the generated ones.
func verdict(exact bool) string {
	if exact {
		return "exact"
	}
	return "MISMATCH"
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
