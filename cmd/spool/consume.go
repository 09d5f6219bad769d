package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/handler"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/task"
)

var consumeCommand = &command{
	name:    "consume",
	env:     true,
	args:    "DIR [--watch] [--exec CMD | --sql FILE | --post URL] [FLAGS]",
	groups:  consumeGroups,
	summary: "drain inbox/ into the ledger (or keep consuming with --watch)",
	help: `
Consumes inbox/ until it is empty, then exits (--watch: until SIGINT or
SIGTERM): each message is claimed, checked against the contract, recorded
in the ledger and moved to done/ (processed, or a duplicate) or error/ (a
dead letter, with its reason). Prints processed=N duplicates=N
dead-letters=N recovered=N. 'spool check DIR', given the same flags and
environment, checks the setup and prints the configuration consume would
run with; consume logs it at start (msg "configuration").

Claims left by a crashed consumer are recovered first, a replay that was
killed half-way is finished, and stale temp files of killed producers are
removed. Any number of consumers may run at once on one queue: every
second, even in the middle of a long backlog, each recovers the claims of
consumers that died meanwhile (of another host, once its --lease ran
out), and releases the msg_ids their calls held once those calls cannot
be running any more. A SPOOL_ variable that is not a setting (a typo:
SPOOL_MINAGE) is warned of.

--watch keeps consuming new arrivals until SIGINT or SIGTERM (see
Stopping). It waits for filesystem notifications (inotify) and scans inbox/
as soon as one comes, and also every second without one; a burst that
overflows the kernel's queue of notifications makes it scan at once (logged,
"notifications overflowed; rescanning"). On NFS, SMB/CIFS, FUSE and other
network filesystems, where notifications miss other hosts' writes, it
polls inbox/ every 250ms instead (logged once); --poll INTERVAL polls at
that interval on any filesystem.

--min-age DURATION leaves in inbox/ each file that changed (content, size,
mtime or ctime) less than DURATION ago, for producers that write a file in
place under its final .json name instead of writing a temp name and
renaming it. The file's ctime counts, so a copy that keeps an old mtime
(cp -p, touch -d) still waits; an mtime in the future is ignored. A drain
leaves such files for the next run.

Stopping: at SIGINT or SIGTERM (a drain or --watch) nothing more is
claimed; the batches being recorded are committed and moved out, the
--exec and --post calls started are finished and committed, and the claims
not called yet go back to inbox/ unrecorded, as do those waiting for a
retry. Then consume exits 0, with nothing of its own in processing/. Exit 0
does not say that inbox/ was emptied: a script that needs to know runs
'spool lag DIR 0' (exit 0 when inbox/ is empty, 1 when not). Calls still
running --shutdown-timeout after the signal (default 60s; 0: no bound) are
cancelled: nothing is recorded of them and their attempts are not
counted, but they are held as after a kill (their claims left in
processing/, their msg_ids reserved until the calls cannot be running, for
the next run's recovery), and consume exits 4; a stop still
blocked 10s after the timeout (a commit the ledger does not answer) exits
4 without waiting more, the next run recovering. A second signal
exits at once, 128 + the signal's number (130, 143): safe at any instant,
the next run recovers what was in flight, calling again the calls whose
outcome was not committed. Each signal is logged (info, warn). When
NOTIFY_SOCKET is set (a systemd Type=notify unit), consume sends READY=1
once consuming began, after the recovery of dead consumers' claims, and
STOPPING=1 at the first signal, each with a STATUS= line.

Business work, at most one handler, run for each new msg_id (a duplicate
never runs it). --sql runs inside the ledger transaction that records the
message; --exec and --post run outside any transaction, up to
--concurrency at once (default 4), each msg_id reserved in the ledger
first so that no two calls for one msg_id run at once on any consumer:
  --exec CMD   /bin/sh -c CMD, the message on stdin, SPOOL_MSG_ID,
               SPOOL_ORDER_NO, SPOOL_SEQ, SPOOL_AMOUNT, SPOOL_FILE,
               SPOOL_QUEUE and SPOOL_CONSUMER (the consumer's session) in
               the environment, and the session's calls lock open on
               descriptor 3 (SPOOL_CALLS_LOCK=3: keep it open, pass it on);
               it dies with its consumer. Exit 0: done. Exit 75
               (EX_TEMPFAIL), a timeout (--exec-timeout) or a signal: retry.
               Any other exit: dead letter (reason handler), the end of its
               stderr as the detail.
  --sql FILE   the file's statements, with :msg_id, :order_no, :seq,
               :amount, :file, :payload and :FIELD (any top-level field)
               bound; they commit or roll back with the processed row. A
               failing statement is a dead letter, unless the database was
               busy or locked (retry). On PostgreSQL a statement running
               --sql-timeout (30s) is cancelled and the message retried;
               SQLite cannot cut one statement short without rolling back
               the batch, so there --sql-timeout is refused. On MariaDB,
               DDL (CREATE TABLE ...) commits the transaction by itself
               and is refused: create tables beforehand.
  --post URL   POST the message (application/json, Idempotency-Key:
               msg_id). 2xx: done. 408, 429, 5xx, network errors: retry,
               no sooner than a Retry-After. Other statuses: dead letter.
A retried message waits in processing/ without holding up the others; its
attempt count and next time are kept in the ledger, so a restart keeps
them. A drain does not wait for a retry that is not due: once only later
retries remain it puts them back in inbox/ and exits, printing
waiting-retries=N next-retry=TIME; the next run holds each until its time
('spool flush DIR' makes them due now). --retry-wait DURATION makes a
drain wait for the retries due within DURATION; --watch waits for all. After --retry-max attempts it is a dead letter, retries-exhausted.
With --exec and --post a crash repeats at most --concurrency commands or
requests: those whose outcome was not committed yet (the same msg_id,
SPOOL_MSG_ID or Idempotency-Key, is sent again), never while the first
may still run: the restart holds the msg_ids whose call had started until
the dead consumer's runs are killed (--exec) or --post-timeout has passed
(--post), and calls the others meanwhile, those the dead consumer reserved
but never called included. Calls are not ordered,
unless --ordered: then the messages of one order key are called one at a
time in this consumer, in seq order among those it holds claimed (about 5
batches of --batch, 256 with --ordered, claimed in name order: a backlog
whose names do not sort by seq is ordered within that window only). On a
batch queue (a format in spool.conf or by flag) a key's records are
called in file order, one waiting for its retry holding the key's later
ones, and the files one at a time in name order, a file held for a retry
holding the later files.
--rate N/s caps the calls started per second; a Retry-After (429, 503) or
--pause-after transient failures in a row pause every new call, logged
once (a warning).

--lease DURATION (default 2m, at least 3s) is how long this consumer's
session lives without a renewal (every third of it) before a consumer on
another host takes its claims over; on PostgreSQL and MariaDB the lease is
a row of the ledger judged by the database's clock. A consumer that could
not renew stops claiming and calling; one whose lease was taken over
meanwhile (a frozen host, a partition) commits nothing of those claims,
logs "lost the lease" once and goes on as a new session. The handler
timeouts must stay under it.

--dedup redis://HOST:PORT/DB puts a dedup window in Redis in front of the
ledger, shared by the consumers of every host: a duplicate whose msg_id
the ledger processed within ?ttl= (default 1h; keep it under prune's
--older-than) is moved to done/ without a ledger write, and a msg_id in
flight on another host waits for its outcome instead of being called. The
ledger stays the truth; with Redis down consumption goes on with the
ledger alone (one warning, spool_dedup_window_errors_total). It is refused
on a batch queue, whose records the ledger alone checks.

--on-dead-letter CMD runs /bin/sh -c CMD for each message that lands in
error/, with SPOOL_FILE (its name there), SPOOL_PATH (its path),
SPOOL_ORIGINAL_FILE (its name in inbox/), SPOOL_REASON, SPOOL_DETAIL,
SPOOL_MSG_ID (empty when it had none) and SPOOL_QUEUE; at most 4 at once, each killed after --on-dead-letter-timeout,
a failure logged as one line on stderr. It never holds up consumption;
consume waits for the notifications still running before it exits.

Logging: log records go to stderr through log/slog, as key=value text or,
with --log-format json, one JSON object a line. At the default level, info,
there is one record per dead letter (msg "dead letter": file, stored,
reason, detail), per recovery of dead consumers' claims (msg "recovered
claims of dead consumers") and per retry scheduled, and none per message
that went well; debug adds one per message (msg "delivered": file, stored,
outcome, msg_id). A WARN record names the entries of inbox/ the queue never
takes (not NAME.json, or not a name spool.conf's include matches), at the
end of a drain and at the start of --watch. warn and error keep only the
problems. -v, which turned
logging on before it was on by default, is the same as --log-level info.
The command's own warnings (stale temp files removed, an interrupted replay
finished, a failing --on-dead-letter) stay lines "spool: consume: ..." in
text and become WARN records in json, where the final error, if any, is an
ERROR record too: every line of stderr is then one JSON object, once the
command line is parsed (a bad flag is refused before --log-format is
known, in the plain "spool: consume: ..." line, with exit 2).

A drain (not --watch) of at least 1000 waiting messages shows a progress
bar on stderr (done/total, rate, elapsed and remaining time) when stderr is
a terminal and the log format is text; never when stderr is a file, a pipe
or the journal. --progress=false turns it off.

--listen ADDR serves Prometheus metrics at /metrics, liveness at /healthz
and readiness at /readyz (the ledger answers, every stage takes a new file)
over HTTP while consume runs, as spool serve does for a queue without a
consumer (spool help serve); the bound address is logged as a record
"listening" with addr. A scrape reads cached values and lists nothing: the
stages are listed in the background (--metrics-refresh). docs/OPERATIONS.md
lists every metric. With --auth FILE it also serves the JSON API under
/api/v1 and the web console at /, with their charts, as spool serve --auth
does (spool help serve).

The contract comes from DIR/spool.conf and the contract flags. The
format of the files (json: a message a file; jsonl, csv, xml: batch
files, a message a record) comes from spool.conf's keys, or for a queue
whose spool.conf sets no format from the format flags (--format,
--encoding, --delimiter, --comment, --record, --include, --done-file,
--hash-key: the keys with dashes), read with the same checks. Where
spool.conf sets a format, a flag that says otherwise is refused (exit 2):
the other commands read the format from spool.conf alone.
Prints: processed=N duplicates=N dead-letters=N recovered=N, and with
--watch a second line rescans=N overflows=N`,
	opts: newOpts[consumeOpts],
}

// consumeOpts are spool consume's: its many flags (consumeFlags).
type consumeOpts struct {
	dirOpts
	cfl     *consumeFlags
	relaxed bool
}

func (o *consumeOpts) flags(fs *flag.FlagSet) { o.cfl = addConsumeFlags(fs) }

// validate checks every flag (consumeFlags.check) before the queue or
// the ledger is touched.
func (o *consumeOpts) validate(e *env, pos []string) (err error) {
	if err := e.positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	o.dir = pos[0]
	o.relaxed, err = o.cfl.check(e, e.fs)
	return err
}

func (o *consumeOpts) run(ctx context.Context, e *env) error {
	cfl := o.cfl
	defer cfl.dedup.close()
	// The logger, the notifier and the progress bar write to stderr from
	// several goroutines. With --log-format json the command's warnings
	// and its final error are records of the logger too (see warn and
	// finish), so that every line of stderr is one object.
	terminal := isTerminal(e.stderr)
	stderr := &stderrWriter{w: e.stderr}
	e.stderr = stderr
	logger := cfl.log.logger(stderr)
	if cfl.log.json() {
		e.log = logger
	}
	// A SPOOL_ variable that is no setting is most likely a typo of one,
	// which would otherwise be ignored without a word.
	for _, line := range program.UnknownVars(os.Environ()) {
		e.warn("%s", line)
	}
	// The clients' own lines too, in the same format.
	clientLogs.Use(logger)
	qo := cfl.options(e, o.relaxed, logger)
	debug := logger.Enabled(ctx, slog.LevelDebug)
	// A progress bar is for a person watching a drain: never with --watch,
	// which does not end, nor among JSON records.
	if bar := !*cfl.watch && *cfl.progress && terminal && !cfl.log.json(); bar {
		qo.OnDrain = func(backlog int) func() {
			if backlog < progressMin {
				return nil
			}
			stderr.startProgress(backlog)
			return stderr.stopProgress
		}
	}
	if qo.OnDrain != nil || debug {
		qo.OnDelivery = func(d *spool.Delivery, r spool.Result, stored string) {
			stderr.delivered()
			if debug {
				logDelivery(logger, d, r, stored)
			}
		}
	}
	qo.OnConfig = func(abs string, c spool.Contract, file, run *queueopen.Config) {
		queueopen.LogSettings(logger, abs, effectiveConfig(e.fs, e.fromEnv, &c, file, run))
	}
	st, err := queueopen.RunConsumer(ctx, o.dir, qo)
	if st != nil {
		fmt.Fprintf(e.stdout, "processed=%d duplicates=%d dead-letters=%d recovered=%d\n",
			st.Processed, st.Duplicates, st.DeadLetters, st.Recovered)
		if *cfl.watch {
			fmt.Fprintf(e.stdout, "rescans=%d overflows=%d\n", st.Rescans, st.Overflows)
		}
		if st.Deferred > 0 {
			fmt.Fprintf(e.stdout, "waiting-retries=%d next-retry=%s\n", st.Deferred, st.NextRetry.UTC().Format(time.RFC3339))
		}
	}
	return consumeFailure(err, o.dir, *cfl.db)
}

// consumeFailure words an error of queueopen.RunConsumer for the command
// line: the ledger's refusals (ledgerFailure), a handler's option, a
// spool.conf approval section the ledger's policy contradicts, and format
// flags that cannot go together as usage errors.
func consumeFailure(err error, dir, db string) error {
	var oe *handler.OptionError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &oe):
		return optionUsage(nil, err)
	case errors.Is(err, task.ErrPolicyMismatch):
		return policyUsage(err)
	case errors.As(err, new(*queueopen.FormatFlagError)):
		return &usageError{msg: err.Error()}
	}
	return ledgerFailure(err, dir, db)
}
