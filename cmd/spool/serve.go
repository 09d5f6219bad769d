package main

import (
	"context"
	"flag"
	"os/signal"
	"syscall"

	"github.com/spoolq/spool/endpoint"
	"github.com/spoolq/spool/queueopen"
)

var serveCommand = &command{
	name:    "serve",
	env:     true,
	args:    "DIR --listen ADDR [--auth FILE] [--tls-cert FILE --tls-key FILE] [--metrics-refresh DURATION] [--db PATH] [--log-format text|json] [--log-level LEVEL]",
	summary: "serve a queue's metrics and health over HTTP without consuming it, and with --auth its API and web console",
	help: `
Serves /metrics, /healthz and /readyz for the queue at DIR, as consume
--listen does, without consuming anything: the backlog and the age of the
oldest waiting message stay visible while no consumer runs (stopped for
maintenance, crashed, not yet deployed). It runs until SIGINT or SIGTERM,
then exits 0.

It opens the ledger as the reports do (status, dups): it never creates
one, never gives an empty database or schema the ledger's tables and never
binds the queue to it; a missing or foreign ledger is refused. Its counters (deliveries, dead letters, commits) stay at zero, since
it delivers nothing; the queue gauges are those of consume:
  spool_queue_messages{stage}            inbox, processing, done, error
  spool_queue_oldest_age_seconds{stage}  inbox, processing, error
listed in the background every --metrics-refresh (default 10s), each stage
no sooner than 100 times its last listing took, so that a scrape lists
nothing and costs the same on a million files in done/.

A stage replaced under its path (inbox/ moved aside or removed, and made
anew) is followed: the next listing counts the directory the path names
now, and a record "a stage of the queue was replaced" is logged.

/healthz answers 200 while the process serves. /readyz answers 200 when the
ledger answers a read within 2 s and every stage can take a new file (an
unnamed O_TMPFILE inode, or a .spool-tmp- file removed at once where the
filesystem lacks O_TMPFILE), else 503 with the reason. docs/OPERATIONS.md
lists every metric.

The address is logged once bound: a record "listening" with addr=HOST:PORT
(port 0 picks a free port).

--auth FILE also serves the JSON API under /api/v1 and the web console at
/ to the identities of FILE, one a line: NAME ROLE SHA256-OF-TOKEN [os=USER]
(# starts a comment; the hash is printf %s TOKEN | sha256sum; os= names
the OS user the token's holder is, for four eyes; spool token add writes
a line and prints its token). FILE must be a regular file that only its
owner may change and not every user may read (chmod 600). Roles: viewer reads
(overview, series, charts, dead-letters, dead-letters/groups, messages/ID,
tasks, audit);
operator also asks replays and discards (POST replays, POST discards) and
cancels tasks; approver also approves others' requests. A request carries
"Authorization: Bearer TOKEN" (none is 401, a role too low 403), or the
console's session cookie from POST /login and its CSRF token. Every action
and refusal is a row of spool audit, via http, with the token's name
(token:NAME); a refusal names the client's address (the TCP peer's), and
its repeats are counted into one row a minute. Sign-ins are limited to 5
at once and 2 a second per address (429 and Retry-After over it).
Requests are judged by the ledger's approval policy as it is at each one
(spool policy). The ledger is then opened for writing. The overview's
charts (GET /api/v1/series, /api/v1/charts) are sampled every
--metrics-refresh and kept in memory for a day: a restart begins them
anew.
docs/OPERATIONS.md, "The console".

A connection idle for 5 s is closed; an address holds at most 16
connections (32 with --auth), the server 512, and at that cap a new
connection takes the slot of the one that waited longest on its client.

--tls-cert FILE --tls-key FILE serve everything over HTTPS instead (PEM
files, read again at the next handshake after they change, so a renewal
needs no restart); the console's cookie is then Secure.`,
	opts: newOpts[serveOpts],
}

// serveOpts are spool serve's.
type serveOpts struct {
	dirOpts
	lf   *logFlags
	hf   *listenFlags
	auth *authFlag
}

func (o *serveOpts) flags(flags *flag.FlagSet) {
	o.lf = addLogFlags(flags)
	o.hf = addListenFlags(flags, "; required")
	o.dirOpts.flags(flags)
	o.auth = addAuthFlag(flags, "")
}

func (o *serveOpts) validate(e *env, pos []string) (err error) {
	if err := o.dirOpts.validate(e, pos); err != nil {
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

func (o *serveOpts) run(ctx context.Context, e *env) error {
	lf, hf := o.lf, o.hf
	stderr := &stderrWriter{w: e.stderr}
	e.stderr = stderr
	logger := lf.logger(stderr)
	if lf.json() {
		e.log = logger
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
