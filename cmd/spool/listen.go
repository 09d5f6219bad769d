package main

import (
	"context"
	"errors"
	"flag"
	"time"

	"github.com/spoolq/spool/console"
	"github.com/spoolq/spool/endpoint"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/metrics"
	"github.com/spoolq/spool/task"
)

// listenFlags are the flags of the metrics and health endpoints, on
// consume and serve.
type listenFlags struct {
	fs              *flag.FlagSet
	addr            string
	refresh         time.Duration
	tlsCert, tlsKey string
	tls             *endpoint.CertFiles // loaded by check when --tls-cert is given
}

func addListenFlags(fs *flag.FlagSet, what string) *listenFlags {
	f := &listenFlags{fs: fs}
	fs.StringVar(&f.addr, "listen", "", "serve /metrics, /healthz and /readyz over HTTP at `ADDR` (host:port: 127.0.0.1:9464 for this host alone; no host, :9464, binds every interface; port 0 picks a free one, logged as \"listening\" addr=...)"+what)
	fs.StringVar(&f.tlsCert, "tls-cert", "", "with --listen: serve HTTPS with the certificate (chain) in PEM `FILE`; read again when it changes")
	fs.StringVar(&f.tlsKey, "tls-key", "", "with --tls-cert: the certificate's private key, PEM `FILE`")
	fs.DurationVar(&f.refresh, "metrics-refresh", metrics.DefaultRefresh, "list each stage for the queue gauges at most this often (`DURATION`; a stage whose listing took T waits at least 100×T)")
	return f
}

// authFlag is --auth, of serve and consume: the token file of the API
// and the console, which the endpoints of --listen serve beside /metrics.
type authFlag struct {
	file   *string
	tokens task.Tokens // loaded by check; nil without --auth
}

// addAuthFlag registers --auth on fs; what ends its usage.
func addAuthFlag(fs *flag.FlagSet, what string) *authFlag {
	return &authFlag{file: fs.String("auth", "", "serve the API under /api/v1 and the console at / to the identities of the token `FILE` (lines NAME ROLE SHA256-OF-TOKEN [os=USER], mode 0600)"+what)}
}

// check loads the token file, refusing an empty or unreadable one as a
// usage error (exit 2).
func (a *authFlag) check(e *env) (err error) {
	if !e.Given("auth") {
		return nil
	}
	if *a.file == "" {
		return e.Usage("--auth is empty: want the token file's path")
	}
	if a.tokens, err = console.LoadTokens(*a.file); err != nil {
		return e.Usage("--auth: %v", err)
	}
	return nil
}

// check validates the flags (endpoint.CheckListen), loading the TLS
// files; need says --listen is required.
func (f *listenFlags) check(e *env, need bool) (err error) {
	f.tls, err = endpoint.CheckListen(context.Background(), endpoint.ListenOptions{Addr: f.addr, Refresh: f.refresh,
		CertFile: f.tlsCert, KeyFile: f.tlsKey, Given: func(name string) bool { return cmdline.Given(f.fs, name) }, Need: need})
	var le *endpoint.ListenError
	switch {
	case !errors.As(err, &le):
		return err
	case le.Alone:
		return &cmdline.UsageError{Msg: le.Msg}
	}
	return e.Usage("%s", le.Msg)
}
