package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/spoolq/spool/console"
	"github.com/spoolq/spool/endpoint"
	"github.com/spoolq/spool/hold"
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

// watchedQueue is the queue the endpoints list and check: the consumer's
// *queue.Dir, or serve's *queue.Follow.
type watchedQueue interface {
	metrics.Lister
	metrics.Stages
}

// endpoints serves the metrics and health of a queue until stop.
type endpoints struct {
	srv    *http.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startEndpoints listens at f.addr, logs the address it bound (record
// "listening", addr), and serves m within endpoint.EndpointLimits with the readiness of d and l; the
// queue gauges are refreshed in the background meanwhile. more, when not
// nil, adds routes to the endpoints' mux (serve --auth's API and console).
func startEndpoints(ctx context.Context, f *listenFlags, log *slog.Logger, m *metrics.Metrics, d watchedQueue, l *ledger.DB, more func(*http.ServeMux)) (*endpoints, error) {
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint: %w", err) // net names the address
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	mux := metrics.Mux(m, metrics.Ready{Ledger: l.SQL(), Dir: d, Paused: pausedOf(l)})
	lim := endpoint.EndpointLimits
	if more != nil {
		more(mux)
		lim = endpoint.ConsoleLimits
	}
	ep := &endpoints{cancel: cancel, srv: endpoint.NewServer(ctx, mux, log, lim)}
	ln = endpoint.NewListener(ln, lim, log)
	if f.tls != nil {
		// The handshake runs in the server's connection goroutine, under
		// its header timeout: a client that stalls it holds a slot until
		// then, or until a new connection needs the slot.
		ln = tls.NewListener(ln, f.tls.Config(log))
		log.Info("listening", "addr", ln.Addr().String(), "tls", true)
	} else {
		log.Info("listening", "addr", ln.Addr().String())
	}
	ep.wg.Add(4)
	go func() {
		defer ep.wg.Done()
		m.Refresh(ctx, d, f.refresh, log)
	}()
	go func() {
		defer ep.wg.Done()
		m.RefreshOutbox(ctx, outboxSource(l), f.refresh, log)
	}()
	go func() {
		defer ep.wg.Done()
		m.RefreshHolds(ctx, holdSource(l), log)
	}()
	go func() {
		defer ep.wg.Done()
		if err := ep.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics endpoint stopped", "err", err)
		}
	}()
	return ep, nil
}

// outboxSource reads l's outbox for its gauges.
func outboxSource(l *ledger.DB) metrics.OutboxSource {
	return func(ctx context.Context) (metrics.OutboxState, error) {
		st, err := l.Outbox().Stats(ctx)
		if errors.Is(err, ledger.ErrNoOutbox) {
			return metrics.OutboxState{}, metrics.ErrNoOutboxGauges
		}
		return metrics.OutboxState{Pending: st.Pending, Oldest: st.Oldest, Parked: st.Parked}, err
	}
}

// holdSource reads l's pause and held msg_ids for their gauges: the set
// only when it changed (one goroutine calls it, RefreshHolds).
func holdSource(l *ledger.DB) metrics.HoldSource {
	version, ids := int64(-1), 0
	return func(ctx context.Context) (metrics.HoldState, error) {
		h, err := l.Holds(ctx, version)
		if err != nil {
			return metrics.HoldState{}, err
		}
		if h.MsgIDs != nil {
			ids = len(h.MsgIDs)
		}
		version = h.Version
		return metrics.HoldState{Paused: h.Paused != nil, HeldIDs: ids}, nil
	}
}

// pausedOf says, for /readyz, whether l's queue is paused, by whom and
// why; a pause that cannot be read is not said (the ledger's own check
// fails then).
func pausedOf(l *ledger.DB) func(context.Context) (string, bool) {
	return func(ctx context.Context) (string, bool) {
		p, err := l.Holding().PauseState(ctx)
		if err != nil || !p.Paused {
			return "", false
		}
		return hold.PausedBy(p), true
	}
}

// stop closes the endpoints, giving requests in flight a moment to end.
func (ep *endpoints) stop() error {
	sctx, done := context.WithTimeout(context.Background(), 2*time.Second)
	defer done()
	err := ep.srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// A request still running (a readiness check on a hung
		// filesystem): cut it off.
		err = ep.srv.Close()
	}
	ep.cancel()
	ep.wg.Wait()
	if err != nil {
		return fmt.Errorf("close metrics endpoint: %w", err)
	}
	return nil
}
