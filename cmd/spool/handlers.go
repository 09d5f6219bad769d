package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/handler"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// defaultSQLTimeout is --sql-timeout's default, as for --exec and --post.
const defaultSQLTimeout = 30 * time.Second

// handlerFlags are consume's flags that choose the business handler run for
// each message in the ledger transaction, and tune its retries.
type handlerFlags struct {
	// lease is the claim lease the handler timeouts must stay under
	// (consume's --lease); zero: queue.DefaultLease.
	lease       time.Duration
	fs          *flag.FlagSet
	exec        string
	execTimeout time.Duration
	sqlFile     string
	sqlTimeout  time.Duration
	post        string
	postTimeout time.Duration
	retryBase   time.Duration
	retryCap    time.Duration
	retryMax    int
	retryJitter bool
	retryWait   time.Duration
	concurrency int
	ordered     bool
	rate        string
	pauseAfter  int

	// Set by check: --rate in calls per second, 0 for none.
	perSecond float64

	// Set by check.
	script      *handler.Script
	postHandler *handler.Post
}

// addHandlerFlags registers the handler and retry flags on fs.
func addHandlerFlags(fs *flag.FlagSet) *handlerFlags {
	hf := &handlerFlags{fs: fs}
	fs.StringVar(&hf.exec, "exec", "", "run `CMD` with /bin/sh -c for each message (message on stdin, SPOOL_* variables); exit 0 done, 75 retry, other exit dead letter")
	fs.DurationVar(&hf.execTimeout, "exec-timeout", handler.DefaultExecTimeout, "kill an --exec command (its whole process group) after `DURATION` and retry the message")
	fs.StringVar(&hf.sqlFile, "sql", "", "run the SQL statements of `FILE` for each message in the ledger transaction, with :msg_id, :order_no, :seq, :amount, :file, :payload and :FIELD parameters")
	fs.DurationVar(&hf.sqlTimeout, "sql-timeout", defaultSQLTimeout, "on a PostgreSQL ledger, cancel a --sql statement after `DURATION` (statement_timeout) and retry the message; SQLite cannot (see --help)")
	fs.StringVar(&hf.post, "post", "", "POST each message to `URL` with an Idempotency-Key header; 2xx done, 408, 429, 5xx and network errors retry, other 4xx dead letter")
	fs.DurationVar(&hf.postTimeout, "post-timeout", handler.DefaultPostTimeout, "give up on a --post request after `DURATION` and retry the message")
	fs.IntVar(&hf.concurrency, "concurrency", spool.DefaultConcurrency, fmt.Sprintf("most --exec commands or --post requests running at once in this consumer, `N` from 1 to %d", maxConcurrency))
	fs.StringVar(&hf.rate, "rate", "", "at most `N/s` --exec commands or --post requests started per second by this consumer (default: no cap)")
	fs.IntVar(&hf.pauseAfter, "pause-after", spool.DefaultPauseAfter, "pause new calls after `N` transient failures in a row (a Retry-After pauses at once); 0 never")
	fs.BoolVar(&hf.ordered, "ordered", false, "call the messages of one order key one at a time, in seq order (different keys still concurrently)")
	fs.DurationVar(&hf.retryBase, "retry-base", spool.DefaultRetryBase, "upper bound of the first retry's delay, `DURATION`; doubled for each further attempt")
	fs.DurationVar(&hf.retryCap, "retry-cap", spool.DefaultRetryCap, "longest `DURATION` between two attempts (also bounds an HTTP Retry-After)")
	fs.IntVar(&hf.retryMax, "retry-max", spool.DefaultRetryMaxAttempts, "`N` attempts a message gets in all before it is dead-lettered as retries-exhausted")
	fs.BoolVar(&hf.retryJitter, "retry-jitter", true, "draw each delay at random below its bound (full jitter); false waits exactly the bound")
	fs.DurationVar(&hf.retryWait, "retry-wait", 0, "a drain waits for the retries due within `DURATION` and leaves later ones in inbox/ for the next run (default 0: waits for none; --watch waits for all)")
	return hf
}

// kind names the handler the flags chose: exec, sql, post, or "" for none.
func (hf *handlerFlags) kind() string {
	switch {
	case strings.TrimSpace(hf.exec) != "":
		return "exec"
	case strings.TrimSpace(hf.sqlFile) != "":
		return "sql"
	case strings.TrimSpace(hf.post) != "":
		return "post"
	}
	return ""
}

// check validates the flags without touching the queue or the ledger, so
// that a bad command line changes nothing: at most one handler, positive
// timeouts, a sane retry policy, a URL spool can post to, and a --sql file
// that splits into statements.
// claimLease is the lease the handler timeouts are checked against.
func (hf *handlerFlags) claimLease() time.Duration {
	if hf.lease > 0 {
		return hf.lease
	}
	return queue.DefaultLease
}

func (hf *handlerFlags) check(e *env) error {
	set := map[string]bool{}
	hf.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var chosen []string
	for _, name := range []string{"exec", "sql", "post"} {
		if set[name] {
			chosen = append(chosen, "--"+name)
		}
	}
	if len(chosen) > 1 {
		return e.usage("%s: choose one handler", strings.Join(chosen, " and "))
	}
	if len(chosen) == 1 && hf.kind() == "" {
		return e.usage("%s is empty", chosen[0])
	}
	kind := hf.kind()
	for _, f := range []struct{ name, needs string }{
		{"exec-timeout", "exec"}, {"post-timeout", "post"}, {"sql-timeout", "sql"},
	} {
		if set[f.name] && kind != f.needs {
			return e.usage("--%s needs --%s", f.name, f.needs)
		}
	}
	if set["concurrency"] {
		if err := checkConcurrency(e, hf.concurrency); err != nil {
			return err
		}
	}
	for _, name := range []string{"concurrency", "ordered", "rate", "pause-after"} {
		if set[name] && kind != "exec" && kind != "post" {
			return e.usage("--%s needs --exec or --post", name)
		}
	}
	for _, name := range []string{"retry-base", "retry-cap", "retry-max", "retry-jitter", "retry-wait"} {
		if set[name] && kind == "" {
			return e.usage("--%s needs a handler (--exec, --sql or --post)", name)
		}
	}
	if kind == "exec" {
		if err := checkExec(hf.exec); err != nil {
			return err
		}
	}
	switch {
	case hf.execTimeout <= 0:
		return e.usage("--exec-timeout %v: want a positive duration", hf.execTimeout)
	case hf.postTimeout <= 0:
		return e.usage("--post-timeout %v: want a positive duration", hf.postTimeout)
	case hf.sqlTimeout <= 0:
		return e.usage("--sql-timeout %v: want a positive duration", hf.sqlTimeout)
	case hf.retryBase <= 0:
		return e.usage("--retry-base %v: want a positive duration", hf.retryBase)
	case hf.retryCap <= 0:
		return e.usage("--retry-cap %v: want a positive duration", hf.retryCap)
	case hf.retryCap < hf.retryBase:
		return e.usage("--retry-cap %v is shorter than --retry-base %v", hf.retryCap, hf.retryBase)
	case kind == "exec" && hf.execTimeout >= hf.claimLease():
		return e.usage("--exec-timeout %v: want less than the claim lease, %v (--lease): a command still running then could be run again by another host", hf.execTimeout, hf.claimLease())
	case kind == "post" && hf.postTimeout >= hf.claimLease():
		return e.usage("--post-timeout %v: want less than the claim lease, %v (--lease): a request still running then could be sent again by another host", hf.postTimeout, hf.claimLease())
	case kind == "sql" && hf.sqlTimeout >= hf.claimLease():
		return e.usage("--sql-timeout %v: want less than the claim lease, %v (--lease): a batch still running then could be claimed by another host", hf.sqlTimeout, hf.claimLease())
	case hf.pauseAfter < 0:
		return e.usage("--pause-after %d: want 0 (never) or more", hf.pauseAfter)
	case hf.retryWait < 0:
		return e.usage("--retry-wait %v: want 0 or a positive duration", hf.retryWait)
	case hf.retryMax < 1:
		return e.usage("--retry-max %d: want 1 or more attempts", hf.retryMax)
	}
	if hf.rate != "" {
		n, err := strconv.ParseFloat(strings.TrimSuffix(hf.rate, "/s"), 64)
		if err != nil || !(n > 0) || math.IsInf(n, 0) {
			return e.usage("--rate %q: want calls per second, as 50/s", hf.rate)
		}
		hf.perSecond = n
	}
	switch kind {
	case "sql":
		data, err := os.ReadFile(hf.sqlFile)
		if err != nil {
			return &usageError{msg: fmt.Sprintf("--sql: %v", err)}
		}
		if hf.script, err = handler.ParseSQL(string(data)); err != nil {
			return &usageError{msg: fmt.Sprintf("--sql %s: %v", hf.sqlFile, err)}
		}
	case "post":
		p, err := handler.NewPost(hf.post, handler.PostOptions{
			Timeout: hf.postTimeout, MaxRetryAfter: hf.retryCap, Connections: hf.concurrency,
			UserAgent: "spool/" + strings.Fields(version())[0],
		})
		if err != nil {
			return e.usage("--post %q: want an http:// or https:// URL", hf.post)
		}
		hf.postHandler = p
	}
	return nil
}

// pauseAfterConfig is --pause-after as Config.PauseAfter: 0 there means
// the default, negative never.
func (hf *handlerFlags) pauseAfterConfig() int {
	if hf.pauseAfter == 0 {
		return -1
	}
	return hf.pauseAfter
}

// retry is the backoff policy the flags give.
func (hf *handlerFlags) retry() spool.Retry {
	return spool.Retry{Base: hf.retryBase, Cap: hf.retryCap, MaxAttempts: hf.retryMax, NoJitter: !hf.retryJitter}
}

// handler returns the handler the flags chose: a spool.Handler run in the
// ledger transaction (--sql), a spool.Caller run outside it (--exec,
// --post), or neither; queue is the queue's absolute path. A --sql file is
// checked against the ledger first (see handler.NewSQL): a statement that
// does not compile is a usage error, before anything is consumed.
func (hf *handlerFlags) handler(ctx context.Context, l *ledger.DB, queue string) (spool.Handler, spool.Caller, error) {
	switch hf.kind() {
	case "exec":
		return nil, &handler.Exec{Command: hf.exec, Timeout: hf.execTimeout, Queue: queue}, nil
	case "sql":
		o := handler.SQLOptions{Timeout: hf.sqlTimeout}
		if err := handler.TimeoutSupported(l); err != nil {
			// The default is for the engines that can bound a statement;
			// only a --sql-timeout asked for on another is refused.
			o.Timeout = 0
			if cmdline.Given(hf.fs, "sql-timeout") {
				return nil, nil, &usageError{msg: "--sql-timeout: " + err.Error()}
			}
		}
		h, err := handler.NewSQL(ctx, l, hf.script, o)
		var se *handler.StatementError
		switch {
		case errors.As(err, &se):
			return nil, nil, &usageError{msg: fmt.Sprintf("--sql %s: %v", hf.sqlFile, err)}
		case err != nil:
			return nil, nil, fmt.Errorf("--sql %s: %w", hf.sqlFile, err)
		}
		return h, nil, nil
	case "post":
		return nil, hf.postHandler, nil
	}
	return nil, nil, nil
}

// maxConcurrency is the most --concurrency a consumer takes: each call is
// a command or a connection at once, and each holds its claim and its
// reservation until it settles; more than this is a typo, or a load the
// endpoint and the machine are better spread over several consumers.
const maxConcurrency = 1024

// checkConcurrency refuses a --concurrency outside 1 to maxConcurrency,
// saying the range.
func checkConcurrency(e *env, n int) error {
	if n < 1 || n > maxConcurrency {
		return e.usage("--concurrency %d: want 1 to %d calls at once", n, maxConcurrency)
	}
	return nil
}
