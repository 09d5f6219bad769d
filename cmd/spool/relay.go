package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/endpoint"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/relay"
)

var relayCommand = &cmdline.Command{
	Name:    "relay",
	Args:    "DIR --to TARGET [--watch] [--window N] [--on-park block|skip] [--listen ADDR] [--db PATH]",
	Summary: "deliver the ledger's outbox to another queue, HTTP, NATS JetStream, RabbitMQ or Kafka, at least once",
	Options: cmdline.New[relayOpts],
}

// relayOpts are spool relay's.
type relayOpts struct {
	dirOpts
	to, onPark, aggregate      *string
	watch, unpark              *bool
	lease, retryBase, poll     *time.Duration
	batch, window, maxAttempts *int
	listen                     *listenFlags
	policy                     relay.Policy
}

func (o *relayOpts) Flags(flags *flag.FlagSet) {
	o.to = flags.String("to", "", "the `TARGET` URL to publish to (required)")
	o.watch = flags.Bool("watch", false, "keep running and publish new rows as they commit, until SIGINT or SIGTERM")
	o.onPark = flags.String("on-park", "block", "what a parked row does to its aggregate: `block` its later rows, or skip it")
	o.lease = flags.Duration("lease", relay.DefaultLease, "how long a relay holds an aggregate without renewing it; another relay takes it over after")
	o.batch = flags.Int("batch", 256, "rows of an aggregate read from the ledger at a time")
	o.window = flags.Int("window", 0, "events in flight at most, sent and not yet acknowledged (default: 256 for nats, amqp and kafka, 8 aggregates at once for dir and http)")
	o.maxAttempts = flags.Int("max-attempts", spool.DefaultRetryMaxAttempts, "failed publishes of a row before it is parked")
	o.retryBase = flags.Duration("retry-base", spool.DefaultRetryBase, "the first retry's delay bound; each next one doubles, up to 5m")
	o.poll = flags.Duration("poll", 200*time.Millisecond, "how often to look for new aggregates (with --watch) or retries due; 5 times that while busy and nothing new was found")
	o.unpark = flags.Bool("unpark", false, "put the parked rows back into the relay's work (all, or --aggregate's) and exit")
	o.aggregate = flags.String("aggregate", "", "with --unpark: only this aggregate's rows")
	o.listen = addListenFlags(flags, "")
	o.dirOpts.Flags(flags)
}

func (o *relayOpts) Validate(e *env, pos []string) error {
	if err := o.dirOpts.Validate(e, pos); err != nil {
		return err
	}
	to, onPark, aggregate, unpark, lease, retryBase, poll, batch, window, maxAttempts, listen :=
		o.to, o.onPark, o.aggregate, o.unpark, o.lease, o.retryBase, o.poll, o.batch, o.window, o.maxAttempts, o.listen
	o.policy = relay.PolicyBlock
	switch *onPark {
	case "block":
	case "skip":
		o.policy = relay.PolicySkip
	default:
		return e.Usage("--on-park %q: want block or skip", *onPark)
	}
	switch {
	case *unpark && *to != "":
		return e.Usage("--unpark exits after unparking: give it no --to")
	case !*unpark && *to == "":
		return e.Usage("missing --to TARGET")
	case *aggregate != "" && !*unpark:
		return e.Usage("--aggregate goes with --unpark")
	case *batch < 1 || *maxAttempts < 1 || *window < 0 || *lease <= 0 || *poll <= 0 || *retryBase <= 0:
		return e.Usage("--batch and --max-attempts want 1 or more, --window 0 or more, --lease, --poll and --retry-base a positive duration")
	}
	if err := listen.check(e, false); err != nil {
		return err
	}
	if *unpark && listen.addr != "" {
		return e.Usage("--unpark exits after unparking: give it no --listen")
	}
	return nil
}

func (o *relayOpts) Run(ctx context.Context, e *env) error {
	lo := ledgerOpts{use: writeLedger}.options(*o.db)
	if *o.unpark {
		n, err := queueopen.Unpark(ctx, o.dir, lo, *o.aggregate)
		if err != nil {
			return ledgerFailure(err, o.dir, *o.db)
		}
		fmt.Fprintf(e.Stdout, "unparked=%d\n", n)
		return nil
	}
	sigCtx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	st, err := queueopen.Relay(sigCtx, o.dir, lo, queueopen.RelayOptions{
		To: *o.to,
		Relay: relay.Options{Lease: *o.lease, Batch: *o.batch, Window: *o.window, Policy: o.policy,
			Retry: spool.Retry{Base: *o.retryBase, MaxAttempts: *o.maxAttempts}, Watch: *o.watch, Poll: *o.poll},
		Listen: endpoint.ServeOptions{Addr: o.listen.addr, TLS: o.listen.tls, Refresh: o.listen.refresh},
		Logger: slog.New(slog.NewTextHandler(e.Stderr, nil)),
		Warn:   func(line string) { e.Warn("%s", line) },
	})
	if st != nil {
		fmt.Fprintf(e.Stdout, "published=%d failed=%d parked=%d\n", st.Published, st.Failed, st.Parked)
	}
	if err != nil {
		return ledgerFailure(err, o.dir, *o.db)
	}
	return nil
}
