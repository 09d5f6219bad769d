package bench

import (
	"fmt"
	"strings"

	"github.com/spoolq/spool/handler"
	"github.com/spoolq/spool/relay"
)

// The checks below refuse a combination of options that cannot be
// measured, before anything is generated; each error names the options
// by the flags of spool bench, the one face that sets them, and given
// reports whether a flag was set on the command line.

// Check checks the options of a plain drain.
func (o Options) Check() error {
	switch {
	case o.N < 1 || o.DupFrac < 0 || o.PoisonFrac < 0 || o.DupFrac+o.PoisonFrac > 1:
		return fmt.Errorf("want --n >= 1 and fractions >= 0 that sum to at most 1")
	case o.Rounds < 1:
		return fmt.Errorf("want --rounds >= 1")
	case o.Format != "" && o.Format != "jsonl" && o.Format != "csv":
		return fmt.Errorf("--format %q: want jsonl or csv", o.Format)
	}
	return nil
}

// Check checks the options of a run with a handler, and takes the
// queue's from o, a plain drain's.
func (co *CallOptions) Check(o Options) error {
	switch {
	case co.Handler != "post" && co.Handler != "exec":
		if co.Handler == "" {
			return fmt.Errorf("--latency, --concurrency and --procs measure a handler: add --handler post or --handler exec")
		}
		return fmt.Errorf("--handler %q: want post or exec", co.Handler)
	case co.Latency <= 0:
		return fmt.Errorf("--latency %v: want a positive duration", co.Latency)
	case co.Concurrency < 1 || co.Concurrency > handler.MaxConcurrency:
		return handler.CheckConcurrency(co.Concurrency)
	case co.Procs < 1:
		return fmt.Errorf("--procs %d: want 1 or more consumers", co.Procs)
	case o.Floor || o.Rounds > 1 || o.Cold || o.Relaxed || o.Syscalls:
		return fmt.Errorf("--handler measures one durable run: no --floor, --rounds, --cold, --syscalls or relaxed durability")
	}
	co.N, co.DupFrac, co.PoisonFrac, co.Seed, co.Parent, co.Keep, co.Batch = o.N, o.DupFrac, o.PoisonFrac, o.Seed, o.Parent, o.Keep, o.Batch
	return nil
}

// Check checks the options of a watching consumer's run, and takes the
// queue's from o, a plain drain's.
func (wo *WatchOptions) Check(o Options, given func(flag string) bool) error {
	for _, name := range []string{"handler", "latency", "concurrency", "procs", "db", "db-delay", "cpuprofile"} {
		if given(name) {
			return fmt.Errorf("--%s is not for --watch, which measures a watching consumer without a handler", name)
		}
	}
	switch {
	case wo.Idle <= 0 || wo.Gap <= 0 || wo.Steady <= 0:
		return fmt.Errorf("--idle, --gap and --steady want positive durations")
	case wo.Trickle < 1 || wo.Rate < 1:
		return fmt.Errorf("want --arrivals >= 1 and --steady-rate >= 1")
	case wo.Poll < 0:
		return fmt.Errorf("--poll %v: want a positive interval", wo.Poll)
	case o.Floor || o.Rounds > 1 || o.Cold || o.Relaxed || o.Syscalls:
		return fmt.Errorf("--watch measures one durable run: no --floor, --rounds, --cold, --syscalls or relaxed durability")
	}
	wo.Parent, wo.Keep = o.Parent, o.Keep
	return nil
}

// Check checks the options of a relay's run; N not given is 5000.
func (ro *RelayOptions) Check(given func(flag string) bool) error {
	for _, name := range []string{"dup", "poison", "seed", "floor", "workers", "batch", "keep", "cold", "syscalls", "handler", "latency",
		"concurrency", "procs", "db", "db-delay", "watch", "durability"} {
		if given(name) {
			return fmt.Errorf("--%s is not for --relay, which measures the outbox relay against a broker's client", name)
		}
	}
	switch {
	case len(ro.Targets) == 0:
		return fmt.Errorf("--aggregates goes with --relay URL")
	case ro.Aggregates < 1:
		return fmt.Errorf("--aggregates %d: want 1 or more", ro.Aggregates)
	}
	if !given("n") {
		ro.N = 5000
	}
	if given("broker-pid") && (ro.BrokerPID < 1 || len(ro.Targets) != 1) {
		return fmt.Errorf("--broker-pid %d: want the PID of the one --relay target's broker", ro.BrokerPID)
	}
	for _, t := range ro.Targets {
		scheme, _, _ := strings.Cut(t, "://")
		if scheme != "nats" && scheme != "amqp" && scheme != "amqps" && scheme != "kafka" {
			return fmt.Errorf("--relay %s: want nats://, amqp:// or kafka://, whose official clients are the ceiling", relay.Redact(t))
		}
	}
	return nil
}
