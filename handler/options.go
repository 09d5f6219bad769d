package handler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// DefaultSQLTimeout is the SQL handler's statement timeout unless one is
// given, as for Exec and Post.
const DefaultSQLTimeout = 30 * time.Second

// MaxConcurrency is the most calls at once a consumer takes: each call is
// a command or a connection, and each holds its claim and its reservation
// until it settles; more than this is a typo, or a load the endpoint and
// the machine are better spread over several consumers.
const MaxConcurrency = 1024

// Options choose a consumer's handler (at most one of Exec, SQLFile and
// Post, each with its timeout) and tune its calls and retries, as spool
// consume's flags give them; its errors name each option by that flag
// (--exec), the one face that sets them. Check validates them without
// touching the queue or the ledger, so that a bad choice changes nothing;
// Build then makes the handler.
type Options struct {
	Exec        string
	ExecTimeout time.Duration
	SQLFile     string
	SQLTimeout  time.Duration
	Post        string
	PostTimeout time.Duration
	RetryBase   time.Duration
	RetryCap    time.Duration
	RetryMax    int
	RetryJitter bool
	RetryWait   time.Duration
	Concurrency int
	Ordered     bool
	// Rate is at most N calls started per second, written N/s; "" for
	// no cap.
	Rate string
	// PauseAfter is the transient failures in a row that pause new
	// calls; 0 never.
	PauseAfter int
	// Lease is the claim lease the handler timeouts must stay under;
	// zero: queue.DefaultLease.
	Lease time.Duration
	// UserAgent is Post's User-Agent header.
	UserAgent string
	// Given reports whether the face set an option itself, by its flag's
	// name ("sql-timeout"), as opposed to leaving its default: an option
	// that needs another is refused only when given.
	Given func(name string) bool

	// Set by Check.
	perSecond float64
	script    *Script
	post      *Post
}

// OptionError is Options refused: Msg names the option. Content says the
// fault is in what an option names (the --sql file, the --exec command,
// the ledger a --sql-timeout needs), not in the options' combination,
// which a command's help explains.
type OptionError struct {
	Msg     string
	Content bool
}

func (e *OptionError) Error() string { return e.Msg }

func refused(format string, args ...any) error {
	return &OptionError{Msg: fmt.Sprintf(format, args...)}
}

// Kind names the handler the options chose: exec, sql, post, or "" for
// none.
func (o *Options) Kind() string {
	switch {
	case strings.TrimSpace(o.Exec) != "":
		return "exec"
	case strings.TrimSpace(o.SQLFile) != "":
		return "sql"
	case strings.TrimSpace(o.Post) != "":
		return "post"
	}
	return ""
}

// claimLease is the lease the handler timeouts are checked against.
func (o *Options) claimLease() time.Duration {
	if o.Lease > 0 {
		return o.Lease
	}
	return queue.DefaultLease
}

// CheckConcurrency refuses calls at once outside 1 to MaxConcurrency,
// saying the range.
func CheckConcurrency(n int) error {
	if n < 1 || n > MaxConcurrency {
		return refused("--concurrency %d: want 1 to %d calls at once", n, MaxConcurrency)
	}
	return nil
}

// Check validates the options without touching the queue or the ledger:
// at most one handler, the options each needs given only with it,
// positive timeouts under the claim lease, a sane retry policy, a command
// that can run, a URL spool can post to, and a --sql file that splits
// into statements. Its errors are *OptionError.
func (o *Options) Check() error {
	set := o.Given
	var chosen []string
	for _, name := range []string{"exec", "sql", "post"} {
		if set(name) {
			chosen = append(chosen, "--"+name)
		}
	}
	if len(chosen) > 1 {
		return refused("%s: choose one handler", strings.Join(chosen, " and "))
	}
	if len(chosen) == 1 && o.Kind() == "" {
		return refused("%s is empty", chosen[0])
	}
	kind := o.Kind()
	for _, f := range []struct{ name, needs string }{
		{"exec-timeout", "exec"}, {"post-timeout", "post"}, {"sql-timeout", "sql"},
	} {
		if set(f.name) && kind != f.needs {
			return refused("--%s needs --%s", f.name, f.needs)
		}
	}
	if set("concurrency") {
		if err := CheckConcurrency(o.Concurrency); err != nil {
			return err
		}
	}
	for _, name := range []string{"concurrency", "ordered", "rate", "pause-after"} {
		if set(name) && kind != "exec" && kind != "post" {
			return refused("--%s needs --exec or --post", name)
		}
	}
	for _, name := range []string{"retry-base", "retry-cap", "retry-max", "retry-jitter", "retry-wait"} {
		if set(name) && kind == "" {
			return refused("--%s needs a handler (--exec, --sql or --post)", name)
		}
	}
	if kind == "exec" {
		if err := CheckCommand(o.Exec); err != nil {
			return &OptionError{Msg: fmt.Sprintf("--exec %q: %v", o.Exec, strings.TrimPrefix(err.Error(), "check command: ")), Content: true}
		}
	}
	switch {
	case o.ExecTimeout <= 0:
		return refused("--exec-timeout %v: want a positive duration", o.ExecTimeout)
	case o.PostTimeout <= 0:
		return refused("--post-timeout %v: want a positive duration", o.PostTimeout)
	case o.SQLTimeout <= 0:
		return refused("--sql-timeout %v: want a positive duration", o.SQLTimeout)
	case o.RetryBase <= 0:
		return refused("--retry-base %v: want a positive duration", o.RetryBase)
	case o.RetryCap <= 0:
		return refused("--retry-cap %v: want a positive duration", o.RetryCap)
	case o.RetryCap < o.RetryBase:
		return refused("--retry-cap %v is shorter than --retry-base %v", o.RetryCap, o.RetryBase)
	case kind == "exec" && o.ExecTimeout >= o.claimLease():
		return refused("--exec-timeout %v: want less than the claim lease, %v (--lease): a command still running then could be run again by another host", o.ExecTimeout, o.claimLease())
	case kind == "post" && o.PostTimeout >= o.claimLease():
		return refused("--post-timeout %v: want less than the claim lease, %v (--lease): a request still running then could be sent again by another host", o.PostTimeout, o.claimLease())
	case kind == "sql" && o.SQLTimeout >= o.claimLease():
		return refused("--sql-timeout %v: want less than the claim lease, %v (--lease): a batch still running then could be claimed by another host", o.SQLTimeout, o.claimLease())
	case o.PauseAfter < 0:
		return refused("--pause-after %d: want 0 (never) or more", o.PauseAfter)
	case o.RetryWait < 0:
		return refused("--retry-wait %v: want 0 or a positive duration", o.RetryWait)
	case o.RetryMax < 1:
		return refused("--retry-max %d: want 1 or more attempts", o.RetryMax)
	}
	if o.Rate != "" {
		n, err := strconv.ParseFloat(strings.TrimSuffix(o.Rate, "/s"), 64)
		if err != nil || !(n > 0) || math.IsInf(n, 0) {
			return refused("--rate %q: want calls per second, as 50/s", o.Rate)
		}
		o.perSecond = n
	}
	switch kind {
	case "sql":
		data, err := os.ReadFile(o.SQLFile)
		if err != nil {
			return &OptionError{Msg: fmt.Sprintf("--sql: %v", err), Content: true}
		}
		if o.script, err = ParseSQL(string(data)); err != nil {
			return &OptionError{Msg: fmt.Sprintf("--sql %s: %v", o.SQLFile, err), Content: true}
		}
	case "post":
		p, err := NewPost(o.Post, PostOptions{
			Timeout: o.PostTimeout, MaxRetryAfter: o.RetryCap, Connections: o.Concurrency, UserAgent: o.UserAgent,
		})
		if err != nil {
			return refused("--post %q: want an http:// or https:// URL", o.Post)
		}
		o.post = p
	}
	return nil
}

// PerSecond is Rate in calls per second once checked, 0 for no cap
// (spool.Config.Rate).
func (o *Options) PerSecond() float64 { return o.perSecond }

// PauseAfterConfig is PauseAfter as spool.Config.PauseAfter: 0 there
// means the default, negative never.
func (o *Options) PauseAfterConfig() int {
	if o.PauseAfter == 0 {
		return -1
	}
	return o.PauseAfter
}

// Retry is the backoff policy the options give.
func (o *Options) Retry() spool.Retry {
	return spool.Retry{Base: o.RetryBase, Cap: o.RetryCap, MaxAttempts: o.RetryMax, NoJitter: !o.RetryJitter}
}

// Build returns the handler the checked options chose: a spool.Handler
// run in the ledger transaction (SQL), a spool.Caller run outside it
// (Exec, Post), or neither; queuePath is the queue's absolute path. A
// --sql file is checked against the ledger l first (see NewSQL): a
// statement that does not compile is an *OptionError, before anything is
// consumed.
func (o *Options) Build(ctx context.Context, l *ledger.DB, queuePath string) (spool.Handler, spool.Caller, error) {
	switch o.Kind() {
	case "exec":
		return nil, &Exec{Command: o.Exec, Timeout: o.ExecTimeout, Queue: queuePath}, nil
	case "sql":
		so := SQLOptions{Timeout: o.SQLTimeout}
		if err := TimeoutSupported(l); err != nil {
			// The default is for the engines that can bound a statement;
			// only a --sql-timeout asked for on another is refused.
			so.Timeout = 0
			if o.Given("sql-timeout") {
				return nil, nil, &OptionError{Msg: "--sql-timeout: " + err.Error(), Content: true}
			}
		}
		h, err := NewSQL(ctx, l, o.script, so)
		var se *StatementError
		switch {
		case errors.As(err, &se):
			return nil, nil, &OptionError{Msg: fmt.Sprintf("--sql %s: %v", o.SQLFile, err), Content: true}
		case err != nil:
			return nil, nil, fmt.Errorf("--sql %s: %w", o.SQLFile, err)
		}
		return h, nil, nil
	case "post":
		return nil, o.post, nil
	}
	return nil, nil, nil
}
