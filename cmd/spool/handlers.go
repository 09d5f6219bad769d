package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/handler"
	"github.com/spoolq/spool/internal/cmdline"
)

// handlerFlags are consume's flags that choose the business handler run for
// each message in the ledger transaction, and tune its retries: the
// handler.Options they set, which check and handler hand to the library.
type handlerFlags struct {
	handler.Options
	fs *flag.FlagSet
}

// addHandlerFlags registers the handler and retry flags on fs.
func addHandlerFlags(fs *flag.FlagSet) *handlerFlags {
	hf := &handlerFlags{fs: fs}
	hf.Given = func(name string) bool { return cmdline.Given(fs, name) }
	fs.StringVar(&hf.Exec, "exec", "", "run `CMD` with /bin/sh -c for each message (message on stdin, SPOOL_* variables); exit 0 done, 75 retry, other exit dead letter")
	fs.DurationVar(&hf.ExecTimeout, "exec-timeout", handler.DefaultExecTimeout, "kill an --exec command (its whole process group) after `DURATION` and retry the message")
	fs.StringVar(&hf.SQLFile, "sql", "", "run the SQL statements of `FILE` for each message in the ledger transaction, with :msg_id, :order_no, :seq, :amount, :file, :payload and :FIELD parameters")
	fs.DurationVar(&hf.SQLTimeout, "sql-timeout", handler.DefaultSQLTimeout, "on a PostgreSQL ledger, cancel a --sql statement after `DURATION` (statement_timeout) and retry the message; SQLite cannot (see --help)")
	fs.StringVar(&hf.Post, "post", "", "POST each message to `URL` with an Idempotency-Key header; 2xx done, 408, 429, 5xx and network errors retry, other 4xx dead letter")
	fs.DurationVar(&hf.PostTimeout, "post-timeout", handler.DefaultPostTimeout, "give up on a --post request after `DURATION` and retry the message")
	fs.IntVar(&hf.Concurrency, "concurrency", spool.DefaultConcurrency, fmt.Sprintf("most --exec commands or --post requests running at once in this consumer, `N` from 1 to %d", handler.MaxConcurrency))
	fs.StringVar(&hf.Rate, "rate", "", "at most `N/s` --exec commands or --post requests started per second by this consumer (default: no cap)")
	fs.IntVar(&hf.PauseAfter, "pause-after", spool.DefaultPauseAfter, "pause new calls after `N` transient failures in a row (a Retry-After pauses at once); 0 never")
	fs.BoolVar(&hf.Ordered, "ordered", false, "call the messages of one order key one at a time, in seq order (different keys still concurrently)")
	fs.DurationVar(&hf.RetryBase, "retry-base", spool.DefaultRetryBase, "upper bound of the first retry's delay, `DURATION`; doubled for each further attempt")
	fs.DurationVar(&hf.RetryCap, "retry-cap", spool.DefaultRetryCap, "longest `DURATION` between two attempts (also bounds an HTTP Retry-After)")
	fs.IntVar(&hf.RetryMax, "retry-max", spool.DefaultRetryMaxAttempts, "`N` attempts a message gets in all before it is dead-lettered as retries-exhausted")
	fs.BoolVar(&hf.RetryJitter, "retry-jitter", true, "draw each delay at random below its bound (full jitter); false waits exactly the bound")
	fs.DurationVar(&hf.RetryWait, "retry-wait", 0, "a drain waits for the retries due within `DURATION` and leaves later ones in inbox/ for the next run (default 0: waits for none; --watch waits for all)")
	return hf
}

// optionUsage words a *handler.OptionError as a usage error: one that
// e's help explains points to it; one about what an option names, or
// found without e, stands alone.
func optionUsage(e *env, err error) error {
	var oe *handler.OptionError
	switch {
	case !errors.As(err, &oe):
		return err
	case oe.Content || e == nil:
		return &cmdline.UsageError{Msg: oe.Msg}
	}
	return e.Usage("%s", oe.Msg)
}
