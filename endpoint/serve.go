package endpoint

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spoolq/spool/hold"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/metrics"
)

// Queue is the queue the endpoints list and check: a consumer's
// *queue.Dir, or spool serve's *queue.Follow.
type Queue interface {
	metrics.Lister
	metrics.Stages
}

// Endpoints serves the metrics and health of a queue until Stop.
type Endpoints struct {
	srv    *http.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// ServeOptions are what Serve serves, and where.
type ServeOptions struct {
	// Addr is the address to listen at, host:port.
	Addr string
	// TLS, when set, serves HTTPS with its certificate pair.
	TLS *CertFiles
	// Refresh is how often, at most, the queue gauges list each stage.
	Refresh time.Duration
	// Log receives the record "listening" (addr) and the server's own.
	Log     *slog.Logger
	Metrics *metrics.Metrics
	Queue   Queue
	Ledger  *ledger.DB
	// More, when not nil, adds routes to the endpoints' mux (the API and
	// the console); they are then served within ConsoleLimits, else
	// EndpointLimits.
	More func(*http.ServeMux)
}

// Serve listens at o.Addr, logs the address it bound (record
// "listening", addr), and serves o.Metrics (metrics.Mux) within the
// Limits above, ready when the ledger answers and every stage takes a
// new file, and saying a pause; the queue, outbox and hold gauges are
// refreshed in the background until Stop.
func Serve(ctx context.Context, o ServeOptions) (*Endpoints, error) {
	log, m, d, l, more := o.Log, o.Metrics, o.Queue, o.Ledger, o.More
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint: %w", err) // net names the address
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	mux := metrics.Mux(m, metrics.Ready{Ledger: l.SQL(), Dir: d, Paused: pausedOf(l)})
	lim := EndpointLimits
	if more != nil {
		more(mux)
		lim = ConsoleLimits
	}
	ep := &Endpoints{cancel: cancel, srv: NewServer(ctx, mux, log, lim)}
	ln = NewListener(ln, lim, log)
	if o.TLS != nil {
		// The handshake runs in the server's connection goroutine, under
		// its header timeout: a client that stalls it holds a slot until
		// then, or until a new connection needs the slot.
		ln = tls.NewListener(ln, o.TLS.Config(log))
		log.Info("listening", "addr", ln.Addr().String(), "tls", true)
	} else {
		log.Info("listening", "addr", ln.Addr().String())
	}
	ep.wg.Add(4)
	go func() {
		defer ep.wg.Done()
		m.Refresh(ctx, d, o.Refresh, log)
	}()
	go func() {
		defer ep.wg.Done()
		m.RefreshOutbox(ctx, outboxSource(l), o.Refresh, log)
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
		h, err := l.Consumer().Holds(ctx, version)
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

// Stop closes the endpoints, giving requests in flight a moment to end,
// and stops the gauges' refreshing.
func (ep *Endpoints) Stop() error {
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
