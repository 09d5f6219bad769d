package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger/sqlite"
)

var consumeCommand = &command{
	name:    "consume",
	args:    "DIR [--watch] [--workers N] [--batch N] [-v] [--db PATH] [contract flags]",
	summary: "drain inbox/ into the ledger (or keep consuming with --watch)",
	help: `
Consumes inbox/ until it is empty, then exits: each message is claimed,
validated against the contract and recorded in the ledger in one durable
transaction, then moved to done/ (processed, or a duplicate) or error/ (a
dead letter, with its reason). Claims left by a crashed consumer are
recovered first. Any number of consumers may run at once on one queue.

--watch keeps consuming new arrivals until SIGINT or SIGTERM, then finishes
the work in flight and exits 0. A drain interrupted by a signal exits 3.

The contract comes from DIR/spool.conf and the contract flags.
Prints: processed=N duplicates=N dead-letters=N recovered=N`,
}

func init() { consumeCommand.run = runConsume }

func runConsume(ctx context.Context, e *env, args []string) (err error) {
	flags := e.flagSet()
	watch := flags.Bool("watch", false, "keep consuming new arrivals until SIGINT/SIGTERM")
	workers := flags.Int("workers", 0, "goroutines claiming and parsing in parallel (default GOMAXPROCS)")
	batch := flags.Int("batch", 0, fmt.Sprintf("most messages per ledger transaction (default %d)", spool.DefaultBatchSize))
	verbose := flags.Bool("v", false, "log what happens to stderr")
	durability := addDurabilityFlag(flags)
	db := addDBFlag(flags)
	cf := addContractFlags(flags)
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := e.positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	if *workers < 0 {
		return e.usage("--workers %d: want 0 (default) or more", *workers)
	}
	if *batch < 0 {
		return e.usage("--batch %d: want 0 (default) or more", *batch)
	}
	relaxed, err := e.relaxed(*durability)
	if err != nil {
		return err
	}
	dir := pos[0]
	d, err := openQueue(dir)
	if err != nil {
		return err
	}
	defer closeQueue(d, &err)
	c, err := cf.contract(dir)
	if err != nil {
		return err
	}
	l, err := sqlite.OpenWith(ctx, ledgerPath(dir, *db), sqlite.Options{Relaxed: relaxed})
	if err != nil {
		return err
	}
	defer closeLedger(l, &err)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if *verbose {
		logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	consumer, err := spool.NewConsumer(d, l, spool.Config{
		Contract: c, Workers: *workers, BatchSize: *batch, Logger: logger, Relaxed: relaxed,
	})
	if err != nil {
		return err
	}
	sigCtx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var st spool.Stats
	if *watch {
		st, err = consumer.Watch(sigCtx)
	} else {
		st, err = consumer.Drain(sigCtx)
	}
	fmt.Fprintf(e.stdout, "processed=%d duplicates=%d dead-letters=%d recovered=%d\n",
		st.Processed, st.Duplicates, st.DeadLetters, st.Recovered)
	if err != nil {
		return err
	}
	if !*watch && sigCtx.Err() != nil {
		return errors.New("interrupted before inbox/ was drained; the work in flight was finished")
	}
	return nil
}
