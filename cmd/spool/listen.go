package main

import (
	"context"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/spoolq/spool/console"
	"github.com/spoolq/spool/endpoint"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/ledger"
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
	if !e.given("auth") {
		return nil
	}
	if *a.file == "" {
		return e.usage("--auth is empty: want the token file's path")
	}
	if a.tokens, err = console.LoadTokens(*a.file); err != nil {
		return e.usage("--auth: %v", err)
	}
	return nil
}

// check validates the flags; need says --listen is required.
func (f *listenFlags) check(e *env, need bool) error {
	if f.addr == "" {
		switch {
		case need:
			return e.usage("--listen ADDR is required")
		case cmdline.Given(f.fs, "listen"):
			return e.usage("--listen is empty: want host:port (127.0.0.1:9464 for this host alone, :9464 for every interface)")
		case cmdline.Given(f.fs, "tls-cert") || cmdline.Given(f.fs, "tls-key"):
			return e.usage("--tls-cert and --tls-key need --listen")
		}
		return nil
	}
	host, port, err := net.SplitHostPort(f.addr)
	if err != nil {
		return e.usage("--listen %q: want host:port (127.0.0.1:9464 for this host alone, :9464 for every interface): %v", f.addr, err)
	}
	// A port that is no number (a service name is looked up) or out of
	// range is a typo, exit 2, not a failure to listen.
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return e.usage("--listen %q: the port %q is not a number from 0 to 65535", f.addr, port)
	}
	if err := checkListenHost(context.Background(), f.addr, host); err != nil {
		return err
	}
	if f.refresh <= 0 {
		return e.usage("--metrics-refresh %v: want a duration above 0", f.refresh)
	}
	return f.checkTLS(e)
}

// checkTLS loads --tls-cert and --tls-key, which go together.
func (f *listenFlags) checkTLS(e *env) error {
	switch {
	case f.tlsCert == "" && f.tlsKey == "":
		if cmdline.Given(f.fs, "tls-cert") || cmdline.Given(f.fs, "tls-key") {
			return e.usage("--tls-cert and --tls-key are empty: want the PEM files' paths")
		}
		return nil
	case f.tlsCert == "":
		return e.usage("--tls-key needs --tls-cert")
	case f.tlsKey == "":
		return e.usage("--tls-cert needs --tls-key")
	}
	c, err := endpoint.LoadCertFiles(f.tlsCert, f.tlsKey)
	if err != nil {
		return e.usage("--tls-cert: %v", err)
	}
	f.tls = c
	return nil
}

// startEndpoints serves the metrics and health of d and l at f's
// address (endpoint.Serve); more, when not nil, adds routes to the
// endpoints' mux (serve --auth's API and console).
func startEndpoints(ctx context.Context, f *listenFlags, log *slog.Logger, m *metrics.Metrics, d endpoint.Queue, l *ledger.DB, more func(*http.ServeMux)) (*endpoint.Endpoints, error) {
	return endpoint.Serve(ctx, endpoint.ServeOptions{Addr: f.addr, TLS: f.tls, Refresh: f.refresh, Log: log, Metrics: m, Queue: d, Ledger: l, More: more})
}
