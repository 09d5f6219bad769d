package queueopen

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultShutdownTimeout is ConsumeOptions.ShutdownTimeout's usual value
// (consume's --shutdown-timeout): how long a stop waits for the calls in
// flight. Above --exec-timeout's and --post-timeout's
// defaults (30s), so that with them a call started is never cut short;
// below the example systemd unit's TimeoutStopSec (examples/ops), which
// adds the wait for --on-dead-letter commands and a margin, so that systemd
// never has to SIGKILL a consumer that is stopping as asked.
const DefaultShutdownTimeout = 60 * time.Second

// ShutdownGrace is how long a stop may go on after the shutdown timeout
// before ConsumeOptions.Exit is called (consume then exits 4) without
// waiting any longer. The timeout
// cancels the calls in flight; what can still hold the stop after it is
// what no cancellation reaches: a commit blocked in the ledger (a
// PostgreSQL row or table lock held by someone else, a server that stopped
// answering), or a Go handler that ignores its context. Exiting then is
// safe at any instant by I7, as a second signal is, and a service manager
// gets a stop that ends when it was told it would. The example unit's
// TimeoutStopSec covers the timeout, this grace and the wait for
// --on-dead-letter commands.
const ShutdownGrace = 10 * time.Second

// stopOnSignal returns a context cancelled at the first SIGINT or SIGTERM,
// which asks the consumer to stop gracefully; a second signal calls exit
// with it, which must end the process at once (safe at any instant by I7:
// the next run recovers). Each signal is logged, one line. onStop runs at
// the first signal. With a timeout, a stop still going ShutdownGrace after
// it calls exit with nil. release stops listening (and that clock). The
// library never exits by itself: exit is the program's.
func stopOnSignal(ctx context.Context, log *slog.Logger, timeout time.Duration, exit func(os.Signal), onStop func()) (stopCtx context.Context, release func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		first := true
		var hard <-chan time.Time
		for {
			select {
			case <-done:
				return
			case <-hard:
				log.Error("the stop is still waiting after the shutdown timeout and its grace (a commit blocked in the ledger, or a handler that ignores cancellation): exiting; the next run recovers the claims in flight",
					"shutdown_timeout", timeout, "grace", ShutdownGrace)
				exit(nil)
			case sig := <-sigs:
				if !first {
					log.Warn("second signal: exiting at once; the next run recovers the claims in flight",
						"signal", sig.String())
					exit(sig)
				}
				first = false
				log.Info("signal: stopping; nothing more is claimed, the work in flight is finished, a second signal exits at once",
					"signal", sig.String(), "shutdown_timeout", timeout)
				if timeout > 0 {
					t := time.NewTimer(timeout + ShutdownGrace)
					defer t.Stop()
					hard = t.C
				}
				onStop()
				cancel()
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
		cancel()
	}
}

// sdNotifier tells systemd (a Type=notify unit) how the service is doing,
// through the datagram socket NOTIFY_SOCKET names (sd_notify(3)). The zero
// of it, without the variable, does nothing.
type sdNotifier struct {
	conn *net.UnixConn
	warn func(error)
	once sync.Once
}

// newSDNotifier connects to NOTIFY_SOCKET when it is set, and takes it
// out of the environment so that the handlers and --on-dead-letter
// commands, which inherit it, cannot speak for the service. A path or an
// abstract socket ('@' first, which the standard library maps to a
// leading NUL); a socket that cannot be reached is a warning, never a
// failure: the service works without it.
func newSDNotifier(warn func(error)) *sdNotifier {
	n := &sdNotifier{warn: warn}
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return n
	}
	os.Unsetenv("NOTIFY_SOCKET")
	if !strings.HasPrefix(addr, "/") && !strings.HasPrefix(addr, "@") {
		n.fail(fmt.Errorf("NOTIFY_SOCKET %q: want an absolute path or an abstract socket (@name)", addr))
		return n
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		n.fail(fmt.Errorf("NOTIFY_SOCKET %s: %w", addr, err))
		return n
	}
	n.conn = conn
	return n
}

// notify sends one datagram of newline-separated assignments
// (READY=1, STOPPING=1, STATUS=...).
func (n *sdNotifier) notify(lines ...string) {
	if n.conn == nil {
		return
	}
	if _, err := n.conn.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		n.fail(fmt.Errorf("sd_notify: %w", err))
	}
}

// fail reports the notifier's first failure only: a journal full of the
// same warning helps nobody.
func (n *sdNotifier) fail(err error) {
	n.once.Do(func() { n.warn(err) })
}

// close closes the socket.
func (n *sdNotifier) close() {
	if n.conn != nil {
		_ = n.conn.Close() // a datagram socket: nothing is buffered to lose
	}
}
