package main

import (
	"context"
	"flag"
	"os/signal"
	"syscall"

	"github.com/spoolq/spool/endpoint"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
)

var serveCommand = &cmdline.Command{
	Name:    "serve",
	Env:     true,
	Args:    "DIR --listen ADDR [--auth FILE] [--tls-cert FILE --tls-key FILE] [--metrics-refresh DURATION] [--db PATH] [--log-format text|json] [--log-level LEVEL]",
	Summary: "serve a queue's metrics and health over HTTP without consuming it, and with --auth its API and web console",
	Options: cmdline.New[serveOpts],
}

// serveOpts are spool serve's.
type serveOpts struct {
	dirOpts
	lf   *logFlags
	hf   *listenFlags
	auth *authFlag
}

func (o *serveOpts) Flags(flags *flag.FlagSet) {
	o.lf = addLogFlags(flags)
	o.hf = addListenFlags(flags, "; required")
	o.dirOpts.Flags(flags)
	o.auth = addAuthFlag(flags, "")
}

func (o *serveOpts) Validate(e *env, pos []string) (err error) {
	if err := o.dirOpts.Validate(e, pos); err != nil {
		return err
	}
	if err := o.lf.check(e); err != nil {
		return err
	}
	if err := o.hf.check(e, true); err != nil {
		return err
	}
	return o.auth.check(e)
}

func (o *serveOpts) Run(ctx context.Context, e *env) error {
	lf, hf := o.lf, o.hf
	stderr := &stderrWriter{w: e.Stderr}
	e.Stderr = stderr
	logger := lf.logger(stderr)
	if lf.json() {
		e.Log = logger
	}
	// The clients' own lines too, in the same format.
	clientLogs.Use(logger)
	lo := ledgerOpts{use: readLedger, readOnly: true}
	if o.auth.tokens != nil {
		lo = ledgerOpts{use: writeLedger} // who binds, for the audit
	}
	err := queueopen.Serve(ctx, o.dir, lo.options(*o.db), queueopen.ServeOptions{
		Listen: endpoint.ServeOptions{Addr: hf.addr, TLS: hf.tls, Refresh: hf.refresh},
		Tokens: o.auth.tokens, Operator: currentOperator().Identity(), Logger: logger,
		Wait: func() {
			sigCtx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			<-sigCtx.Done()
		},
	})
	if err != nil {
		return ledgerFailure(policyUsage(err), o.dir, *o.db)
	}
	return nil
}
