package queueopen

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/spoolq/spool/endpoint"
	"github.com/spoolq/spool/metrics"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/task"
)

// ServeOptions are one serving of a queue without a consumer (Serve).
type ServeOptions struct {
	// Listen is where the endpoints are served: its Addr, TLS and
	// Refresh are read, the rest is Serve's.
	Listen endpoint.ServeOptions
	// Tokens, when not nil, also serves the API and the console to their
	// identities (NewConsole), whose tasks run as Operator.
	Tokens   task.Tokens
	Operator task.Identity
	// Logger receives the endpoints' records; nil discards them.
	Logger *slog.Logger
	// Wait, called once the endpoints listen, returns when serving
	// should stop (spool serve: at SIGINT or SIGTERM); nil: when ctx is
	// done.
	Wait func()
}

// Serve serves the metrics, health and readiness of the queue at dir
// (endpoint.Serve), and with o.Tokens its API and console, until o.Wait
// returns, as spool serve does: the ledger (opened as lo says, its Use
// set here) is opened read-only unless the API is served, which writes
// the audit's rows and runs tasks; the console reads the contract of
// spool.conf; the stages are followed to the directories their paths
// name when one is replaced (queue.NewFollow: nothing here holds a
// claim), which is logged. A spool.conf approval section that the
// ledger's policy contradicts is task.ErrPolicyMismatch.
func Serve(ctx context.Context, dir string, lo Options, o ServeOptions) (err error) {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	lo.Use, lo.ReadOnly = Read, true
	if o.Tokens != nil {
		// The API writes the audit's rows and runs tasks.
		lo.Use, lo.ReadOnly = Write, false
	}
	d, l, err := openBound(ctx, dir, lo)
	if err != nil {
		return err
	}
	defer closeBound(d, l, &err)
	// Nothing here holds a claim, so a stage replaced under its path (an
	// operator's new inbox/) is followed rather than reported empty.
	follow := queue.NewFollow(d, func() {
		logger.Info("a stage of the queue was replaced: serving the directories its paths name now", "queue", d.Path())
	})
	defer func() {
		if cerr := follow.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	m := metrics.New()
	var more func(*http.ServeMux)
	if o.Tokens != nil {
		c, conf, err := LoadContract(dir, Override{})
		if err != nil {
			return err
		}
		srv, err := NewConsole(ctx, dir, d, l, c, conf, o.Tokens, m, o.Listen.Refresh, o.Operator, logger)
		if err != nil {
			return err
		}
		defer srv.Close()
		more = srv.Register
	}
	ep, err := endpoint.Serve(ctx, endpoint.ServeOptions{Addr: o.Listen.Addr, TLS: o.Listen.TLS, Refresh: o.Listen.Refresh,
		Log: logger, Metrics: m, Queue: follow, Ledger: l, More: more})
	if err != nil {
		return err
	}
	if o.Wait != nil {
		o.Wait()
	} else {
		<-ctx.Done()
	}
	return ep.Stop()
}
