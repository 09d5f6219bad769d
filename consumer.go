package spool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/queue"
)

// How a run is built, drawn once: its goroutines, what each owns, the
// channels between them and the locks. Names are the code's. One file per
// stage: consumer_claim.go claims and examines, consumer_record.go records
// in the ledger's transaction, consumer_call.go reserves and calls for a
// Caller, consumer_settle.go commits the calls' outcomes,
// consumer_finish.go moves files out (or holds them for their retry), and
// consumer_session.go is what runs beside the passes of a session (the
// lease, the recovery clock, the operator's holds, the watch of inbox/,
// the graceful stop). Recovery is consumer_recover.go, a batch file's
// records consumer_batch.go.
//
// A pass (pass, below) is three stages joined by channels:
//
//	inbox/ ─▶ claimAll ───ready───▶ recordAll ──recorded──▶ finishAll ─▶ done/, error/
//	             │ toRead     synced ▲  (run goroutine)        (holds back retries)
//	             ▼                   │
//	      examining pool        claim sync
//
// With a Caller the recording stage is callAll instead:
//
//	ready ─▶ reserve ──▶ admit ──admitted, slots──▶ start: one goroutine per call
//	           │ dead letters, duplicates                │ done
//	           ▼                                         ▼
//	        recorded ◀── handOver ◀──settled── settleAll (min(k, Concurrency) of them)
//
// Beside the passes: for the session, the lease keeper (lease.wait holds
// claimAll and start), the recovery clock (back rings claimAll to scan
// again, failed fails the pass) and the shutdown timer (cancels the calls'
// context); for the whole run, the hold watch (holdWait holds claimAll
// and start; a pause stops a drain).
//
// Goroutines, and the state each owns:
//
//   - the run goroutine: the loop of consume and runSession: runState (the
//     run's Stats, started, waiting), the session, its recoveries before
//     the first pass and at the end of a drain (recoverer.now), the claims
//     due back to inbox/ (requeueDue), the retry schedule, the wait for
//     the next pass. In a pass it is the recording stage (recordAll, or
//     callAll), which alone writes pipeline.st until the pass ends (with a
//     Caller, shared with settleAll under callStage.stMu); batch files'
//     counts reach it through Consumer.batchStats (batchMu).
//   - the lease keeper (leaseKeeper.loop, consumer_session.go): the
//     lease's state (leaseKeeper.mu); renews the session's lease; while it
//     cannot, claimChunk and awaitCall (before each call) wait.
//   - the recovery clock (recoverer.loop): recovers dead consumers' claims
//     every RecoverInterval, during passes as between them; started after
//     the first recovery, stopped and waited for (recoverer.stop) before
//     the session is closed or abandoned, so it never sees the session's
//     own directory unlocked. What it recovered is counted in
//     recoverer.pending (atomic), which the run goroutine adds to
//     Stats.Recovered between passes: it never writes the run's Stats. It
//     calls the Observer and, for recovered dead letters, OnDelivery,
//     concurrently with the pass (both must be safe for concurrent use).
//   - the hold watch (holdWatch.loop): the pause and the held msg_ids as
//     last read (holdWatch.mu; ids replaced whole, atomically), for the
//     whole run.
//   - the shutdown timer (newStopping): a context.AfterFunc that arms
//     Config.ShutdownTimeout, then cancels callCtx, the calls' context.
//   - with Watch, the watcher's notification reader (queue.Arrivals).
//   - the failure watch of a pass: fails the pass (fail) when a recovery
//     of the clock fails (recoverer.failed); ends with the pass.
//   - the claiming stage (claimAll, consumer_claim.go): the scan and its
//     chunks; claims a batch at a time holding moves, sends each batch on
//     ready, and owns each batch's items until it does.
//   - the examining pool (inspectBatch): Workers goroutines per batch,
//     each reading and parsing the claims it takes from toRead into their
//     items (a batch file's records consumed whole, consumer_batch.go).
//   - a claim sync per batch (syncClaims), its result on synced.
//   - the prefetcher (prefetcher, consumer_claim.go), reading chunks ahead.
//   - the finishing stage (finishAll, consumer_finish.go): the moves' sync
//     clock (moveSync); moves committed files out of processing/ holding
//     moves.
//
// Without a Caller, on a ledger of k > 1 concurrent writes and with no
// Handler, the recording stage is recordAhead (consumer_record.go) and
// adds:
//
//   - the record feeder, which starts each batch's transaction once no
//     transaction in flight shares a msg_id with it;
//   - one goroutine per batch's record transaction, at most k at once.
//
// With a Caller the recording stage is callAll (consumer_call.go) and adds:
//
//   - with a ledger of k > 1 concurrent writes, the reserve feeder
//     (reserveAhead), and one goroutine per batch's reserve;
//   - one goroutine per admitted delivery (callStage.start): it owns its
//     item; waits for a slot, the gate (pause, rate) and the lease, then
//     calls;
//   - min(k, Concurrency) committers (settleAll, consumer_settle.go), each
//     committing the finished calls as a group;
//   - handOver, which passes committed groups to the finishing stage;
//   - for a batch file being read, in its examining worker, which owns
//     its records' state (callRun, consumer_batchcall.go): one goroutine
//     per record reserved (waits for a slot of Consumer.batchSlots, the
//     gate and the lease, then calls; hands it back on callRun.done) and one
//     per record waiting to be reserved again (busy, or its retry; on
//     callRun.again); all give up once callRun.quit is closed.
//
// An item belongs to one goroutine at a time and passes with the channel
// that carries it: written by its examining worker, then by the recording
// stage (its result), then read by the finishing stage.
//
// Channels, their capacity, who sends and who closes:
//
//   - ready (inspected, 1): claimAll → recording stage; closed by the
//     claiming goroutine when claimAll returns.
//   - toRead (int, len(batch)): claimBatch → examining pool; closed by
//     inspectBatch once claimBatch returns. Never blocks the claimer.
//   - synced (error, 1): one value from a claim sync; never closed.
//   - chunks (names, 1): offer → prefetcher; closed by prefetcher.stop.
//     offer never waits (a full channel skips the chunk).
//   - recorded ([]item, 1): recording stage (and reserve, for the dead
//     letters and duplicates it commits; handOver, for committed calls) →
//     finishing stage; closed by recordAll or callAll once nothing more
//     can send on it.
//   - stop (struct{}, 0): closed once, by fail, at the pass's first
//     failure; every stage selects on it where it may block.
//   - recoverer.back (struct{}, 1): the recovery clock → claimAll, a
//     doorbell rung when the clock recovered claims, so that the scan of
//     inbox/ starts again (errRescan); emptied at the start of a pass.
//     Never closed; never blocks the clock.
//   - recoverer.failed (struct{}, 0): closed by the recovery clock at its
//     first failure, after setting fault; the failure watch, the watcher's
//     wait and a drain's wait for a retry select on it.
//   - recoverer.end (struct{}, 0): closed once, by recoverer.stop.
//   - holdWatch.change (struct{}, 0): closed and replaced by the hold
//     watch when the pause changes, waking holdWait.
//   - flights (*recording, k-1): record feeder → recordAhead, in claim
//     order; closed by the feeder. Each recording's done is closed by its
//     transaction's goroutine when the transaction has ended.
//   - futures (chan reserved, k-1): reserve feeder → callAll, in claim
//     order; closed by the feeder. Each future (1) gets one value.
//   - admitted (token, Concurrency + 2 × BatchSize): a token per reserved
//     delivery not yet handed over; admit sends, out receives. Bounds
//     what a pass reserves ahead of its calls. Never closed.
//   - slots (token, Concurrency): a token per call in flight or finished
//     and not yet committed; start sends, settleAll receives after the
//     commit. Never closed.
//   - done (called, Concurrency): call goroutines → settleAll; closed by
//     callAll once inflight reaches zero (no call goroutine is left).
//   - settled ([]item, admitted's capacity): settleAll → handOver; closed
//     when every settleAll has returned. Never full: each item in it holds
//     an admitted token.
//
// Locks, and their order (a lock is taken only after those before it):
//
//	moves → Consumer.mu → (leaves)
//	recoverer.mu → Consumer.recoverMu → Consumer.mu → (leaves)
//
//   - recoverer.mu: held through each recovery of a session, the clock's
//     and the run goroutine's; guards recoverer.closed, so that no
//     recovery follows a drain's last.
//   - Consumer.recoverMu: held through each recovery (recover), the
//     session's and Recover's: one at a time in a Consumer. A recovery
//     renames files without moves (rarely: only dead sessions' claims),
//     and calls the ledger, the Observer and OnDelivery under both.
//   - moves (Consumer): held by whichever stage renames files for a whole
//     batch (claimBatch, moveOut, giveBack); under it claimBatch and
//     moveOut take Consumer.mu (isWaiting, hold). OnDelivery runs under it,
//     but for the dead letters a recovery reports (under the recovery
//     locks, concurrently).
//   - Consumer.mu: waiting, schedule, session. requeueDue renames under it
//     without moves (a rename per claim due; none of a batch's).
//   - leaves, under which nothing else is taken and nothing blocks:
//     Consumer.deadMu (dead sessions holding reservations),
//     Consumer.batchMu (batch files' counts), gate.mu, leaseKeeper.mu,
//     holdWatch.mu, callStage.keyMu (order keys), callStage.backMu (the
//     claims given back), callStage.stMu (the pass's Stats), ageClock.mu,
//     and the shutdown timer's lock in newStopping.
//
// No lock is held while sending on a channel that can block, nor during a
// call or a ledger transaction, but moves during the renames of a batch
// and the two recovery locks during a recovery, which no stage of a pass
// waits for.

// Defaults of Config.
const (
	DefaultBatchSize = 256
	// DefaultBatchBytes bounds the bytes of messages in one batch. Small
	// messages never reach it (256 of 200 bytes are 50 KiB); large ones
	// make smaller batches, so that the five batches a pass may hold at
	// once (claimed, recording, moving out, and the hand-overs between)
	// stay within tens of MiB instead of 5 × 256 × the size limit.
	DefaultBatchBytes = 8 << 20
	// DefaultRecordBatchSize is Config.BatchSize when it is zero for the
	// records of a batch file consumed without a Handler or a Caller: a
	// record costs no claim and no rename, and what a transaction costs
	// whatever its size (the commit's write of the WAL and its fsync, the
	// file's progress row, the fsyncs of error/ after its dead letters,
	// the hand-over between the reading and the committing goroutines)
	// was a third of a record's processor time at 256. A chunk is also
	// closed at BatchBytes of records. The three chunks held at once
	// (read ahead, committing, and the one being read) set the peak RSS:
	// over 1 GB, 51, 61 and 76 MiB at 512, 1024 and 2048 records, the
	// CPU a record the same within the noise (docs/PERFORMANCE.md,
	// "Batch files"), so 1024 keeps a drain of any length under 64 MiB.
	DefaultRecordBatchSize = 1024
	DefaultPollInterval    = 250 * time.Millisecond
	// DefaultWorkersPerCPU sizes the pool that reads and parses claimed
	// messages: more workers than cores, because a worker may wait in the
	// kernel on the disk. A backlog that sat for a while is no longer in the
	// page cache, so its files are read from the disk; with one worker per
	// core, every such read stalls a core's share of the pipeline. On a
	// backlog partly out of the cache, 4 per core drained faster than 1
	// with no more CPU per message, and a warm queue is the same either
	// way (docs/PERFORMANCE.md, "Kept, and what it bought", has the figures).
	DefaultWorkersPerCPU = 4
)

// Config tunes a Consumer. The zero value of every field means its default.
type Config struct {
	// Contract validates messages. Zero value: DefaultContract().
	Contract Contract
	// Workers is how many goroutines read and parse claimed messages in
	// parallel; the claims themselves are made one after another.
	// Zero: DefaultWorkersPerCPU × GOMAXPROCS.
	Workers int
	// BatchSize is the most deliveries committed in one ledger transaction.
	// Zero: DefaultBatchSize, or with a Caller CallerBatchSize(Concurrency)
	// (unless Ordered, which orders what is claimed: the larger window),
	// and for a batch file's records without a Handler or a Caller
	// DefaultRecordBatchSize. 1 gives one commit per message.
	BatchSize int
	// BatchBytes closes a batch early once the files claimed into it reach
	// this many bytes, with what their fields hold parsed (a field is 56
	// bytes however short); the file that crosses the bound stays in the
	// batch, so a batch always holds at least one message. A batch file's
	// chunk of records closes early at this many bytes of what its
	// records hold (as read, as JSON and parsed), with a Handler or a
	// Caller too, and a Caller holds at most twice as many ahead of its
	// calls. Zero: DefaultBatchBytes.
	BatchBytes int64
	// Lease is how long a session of another host may go silent before its
	// claims are taken over. Zero: queue.DefaultLease.
	Lease time.Duration
	// PollInterval is how often Watch lists inbox/ when it polls: with
	// Poll, or where notifications cannot be had (a network or FUSE
	// filesystem, no inotify instance left). Zero: DefaultPollInterval.
	PollInterval time.Duration
	// Poll makes Watch poll inbox/ every PollInterval instead of waiting
	// for filesystem notifications: for a queue that other hosts write to
	// over a network filesystem that detection does not recognise.
	Poll bool
	// RescanInterval is how often a Watch that has notifications lists
	// inbox/ without being notified. Zero: DefaultRescanInterval.
	RescanInterval time.Duration
	// RecoverInterval is how often a Drain or Watch recovers dead
	// consumers' claims (and releases the msg_ids their calls held) while
	// it runs, during a pass as between passes; it also recovers before
	// its first pass and at the end of a drain. Zero:
	// DefaultRecoverInterval.
	RecoverInterval time.Duration
	// MinAge, when positive, leaves in inbox/ every file that changed
	// (its content, size, mtime or ctime) less than MinAge ago: for
	// producers that write a file in place under its final name instead
	// of renaming it in. A Drain leaves such files where they are; a
	// Watch scans again when the youngest would settle. Zero: a file is
	// claimed as soon as it is seen.
	MinAge time.Duration
	// Handler, when set, does the business work of each message inside the
	// ledger transaction (Ledger.Record). Nil: the ledger's processed
	// row is the only work.
	Handler Handler
	// Caller, when set, does the business work of each message outside
	// any ledger transaction (see Caller), its msg_ids reserved in the
	// ledger (Ledger.Reserve). At most one of Handler and Caller may be set.
	Caller Caller
	// Concurrency is how many Caller calls may run at once in this
	// consumer, whatever the batch size or the number of workers.
	// Zero: DefaultConcurrency. Unused without a Caller.
	Concurrency int
	// Rate caps this consumer's Caller calls per second (a token bucket
	// of one). Zero: no cap.
	Rate float64
	// PauseAfter is how many transient failures of calls in a row pause
	// every new call (see gate); a RetryAfterError pauses them at once, for
	// its After. Zero: DefaultPauseAfter; negative: failures never pause.
	PauseAfter int
	// Ordered makes a Caller's calls of one order key (Message.OrderNo)
	// one at a time in this consumer, the claimed deliveries of a key in
	// seq order; different keys, and messages without one, are called
	// concurrently. Batch files' records of a key are called in file
	// order, a record waiting for its retry holding the key's later ones,
	// and the batch files one at a time, in claim order (docs/DESIGN.md,
	// "Batch files: the consumer"). Unused without a Caller.
	Ordered bool
	// ShutdownTimeout bounds a graceful stop with a Caller: once the
	// context of Drain or Watch is cancelled, the calls in flight may run
	// this long before their context is cancelled too. A call so cut short
	// is not a failure of its message (its attempt is not counted), but
	// what it started may still run: its claim and its msg_id's
	// reservation are left for recovery as a kill leaves them, the next
	// consumer holds the msg_id until the call cannot be running, and the
	// run returns ErrShutdownTimeout. Zero: calls are never cut short.
	// Only a call that honours its context ends when cancelled: a Caller
	// that ignores it, or a ledger commit that blocks, still holds the stop
	// (the CLI exits after a grace period for that; a program embedding
	// the consumer may do the same, safely by I7).
	ShutdownTimeout time.Duration
	// Retry is the policy that decides what a handler's failure makes of
	// a message (Retry.Decide): a dead letter, or a retry with backoff.
	// Zero: the documented defaults of Retry.
	Retry Retry
	// RetryWait is how far ahead a Drain waits for a retry to fall due:
	// one due later is left in inbox/ (Stats.Deferred) for a later run,
	// which holds it until its time, so that a retry due in an hour does
	// not hold a cron-driven drain an hour. Zero: a Drain waits for none.
	// Watch always waits.
	RetryWait time.Duration
	// Relaxed skips the directory fsyncs around each batch. Pair it with a
	// relaxed ledger: a power cut may then lose the last batches' records or
	// moves (a crash of the process loses nothing). Never the default.
	Relaxed bool
	// Window, when set, is a dedup window in front of the ledger (see
	// Window): duplicates it knows are absorbed without a ledger write,
	// and a msg_id another consumer has in flight waits. The ledger stays
	// the truth, and a failing window leaves consumption to the ledger
	// alone. Nil: none. Not with Batch: NewConsumer refuses the two, a
	// batch file's records being looked up in the ledger alone.
	Window Window
	// Batch, when set, says which claimed files are batch files and reads
	// their records, each a message of its own (docs/DESIGN.md, "Batch
	// files: the consumer"); queueopen sets it from spool.conf's format.
	// The ledger keeps their progress (Ledger.RecordBatch). With a
	// Caller each record is reserved, called and settled as a file
	// message is, and the file's progress passes only records settled
	// (consumer_batchcall.go).
	// Nil: every file is one JSON message.
	Batch BatchFiles
	// Logger receives operational events. Nil: discard.
	Logger *slog.Logger
	// OnDelivery, when set, is called after each delivery has reached done/
	// or error/, with what the ledger recorded for it and the name it got
	// there; for progress, metrics and notifications. It must be quick and
	// safe for concurrent use, and must not modify d. It is also called for
	// a dead letter that recovery moved to error/ because its consumer died
	// after recording it (see Ledger.ClaimReject): d then holds only Claim and
	// File, and the run counts it as recovered, not as a dead letter.
	OnDelivery func(d *Delivery, r Result, stored string)
	// OnStart, when set, is called once per Drain or Watch when consuming
	// begins: after the session joined and the first recovery of dead
	// consumers' claims, before the first claim; for readiness (a
	// supervisor's, such as systemd's READY=1). It must be quick.
	OnStart func()
	// Observer is told of deliveries, commits, calls, recoveries and
	// rescans as they happen, for metrics. Nil: NopObserver.
	Observer Observer
	// HoldInterval is how often a Drain or Watch reads the operator's
	// pause of the queue and the msg_ids held (see Ledger.Holds): a pause
	// or a hold reaches the consumer within about that long. Zero:
	// DefaultHoldInterval.
	HoldInterval time.Duration
}

// Stats counts what a run did. Processed, Duplicates, DeadLetters and
// Retries count outcomes as the ledger commits them, so that the Stats a
// failed run returns say what it committed even when it failed before
// moving those files out of processing/ (the next run's recovery moves
// them, counting them as Recovered).
type Stats struct {
	Processed   int
	Duplicates  int
	DeadLetters int
	// Recovered counts claims of dead consumers finished or put back.
	Recovered int
	// Retries counts transient handler failures scheduled for a retry.
	Retries int
	// Deferred counts the retries a Drain left waiting because they were
	// not due within Config.RetryWait, and NextRetry is the earliest one's
	// due time. They are back in inbox/ and their schedule is in the
	// ledger: the next run holds each until it is due.
	Deferred  int
	NextRetry time.Time
	// ColdReads counts claimed messages whose data had left the page cache
	// when a worker read them, so that it waited for the disk. ReadAhead
	// counts the messages found so before their claim, whose reads were
	// queued at once while the backlog was cold (see prefetcher).
	ColdReads, ReadAhead int
	// Passes counts the scans of inbox/ the run made: a run that is waiting
	// (for a retry to fall due, or for arrivals) passes once per wait, not
	// in a loop.
	Passes int
	// Rescans counts the scans of a Watch that no notification asked for
	// (periodic, polling, or after an overflow); Overflows counts the times
	// the kernel dropped notifications (each answered by a rescan at once).
	Rescans, Overflows int
	// Paused is set when a Drain ended because an operator paused the
	// queue (spool pause): it claimed nothing from then on, finished what
	// it had started, gave back what it had not called, and returned nil,
	// with processing/ as a graceful stop leaves it (see Ledger.Holds).
	Paused bool
}

// Total is the number of deliveries finished.
func (s Stats) Total() int { return s.Processed + s.Duplicates + s.DeadLetters }

func (s *Stats) add(o Outcome) {
	switch o {
	case OutcomeProcessed:
		s.Processed++
	case OutcomeDuplicate:
		s.Duplicates++
	case OutcomeDeadLetter:
		s.DeadLetters++
	case OutcomeRetry:
		s.Retries++
	}
}

// Consumer drains a queue directory into a ledger, keeping I1 to I7.
type Consumer struct {
	dir    *queue.Dir
	ledger Ledger
	// batchStats counts what batch files' records became, for the pass
	// to add to its Stats (consumer_batch.go).
	batchMu    sync.Mutex
	batchStats Stats
	// batchStop is the context of the pass running, which a batch file
	// being read checks between its commits; written by pass before its
	// claiming stage starts.
	batchStop context.Context
	// batchPass is the pass running, whose stop, lease and calls' context
	// a batch file's calls heed as a file's do (consumer_batchcall.go);
	// written with batchStop.
	batchPass *pipeline
	// batchWatch says the run is a Watch, which waits for every retry of
	// a batch file's records, where a Drain defers those not due within
	// Config.RetryWait; written by the run goroutine before each pass.
	batchWatch bool
	// batchSlots holds a token per call of a batch file's records in
	// flight or returned and not yet settled, across the files consumed
	// at once by the examining workers: at most Concurrency in all.
	batchSlots chan struct{}
	gate       *gate      // paces the Caller's calls, across passes
	holds      *holdWatch // the operator's pause and holds
	win        *windowGuard
	cfg        Config
	log        *slog.Logger
	// recordBatch is Config.BatchSize as given, or DefaultRecordBatchSize
	// when zero: the most records of a batch file in one transaction
	// without a Handler or a Caller (readChunks).
	recordBatch int
	// writeFiles writes a batch file's dead letters into a stage: the
	// queue's Dir.WriteStageFiles, or a test's fault in front of it.
	writeFiles func(queue.Stage, []queue.StageFile) ([]queue.StoredCopy, error)

	// moves is held by whichever stage of a pass is renaming files, the
	// claiming or the finishing, for a whole batch at a time. The kernel
	// runs the cross-directory renames of one filesystem one at a time
	// (Linux's s_vfs_rename_mutex), so a second thread renaming at once
	// gains nothing: it spins on that lock, on a core the reads, parsing
	// and ledger could have used (docs/PERFORMANCE.md, "Kept, and what it
	// bought").
	moves sync.Mutex
	// parsedPerKiB is the parsedWeight a KiB of the last batch's files
	// (inspectBatch): the next batch's claims are bounded by it before
	// they are parsed.
	parsedPerKiB atomic.Int64

	// waiting are claims held in processing/ until their retry is due;
	// schedule is the ledger's retry schedule as of the current pass.
	mu       sync.Mutex
	waiting  []waiting
	schedule map[string]time.Time

	young ageClock // when the files MinAge holds back are old enough

	// hinted is when the log last said a dead letter's file was perhaps
	// still being written (logDetail), in Unix nanoseconds.
	hinted atomic.Int64

	// running is set while a Drain or Watch runs (one at a time:
	// waiting, schedule and session belong to it); session is its
	// session's ID, under mu.
	running atomic.Bool
	session string
	// recoverMu is held through each recovery (recover): the clock's and
	// the run goroutine's recoveries of a session, and Recover's, are one
	// at a time.
	recoverMu sync.Mutex
	// dead are the dead sessions holding reservations, as recovery
	// found them (see releaseDeadReservations), under deadMu.
	deadMu sync.Mutex
	dead   map[string]*deadOwner
}

// ErrAlreadyRunning is returned by Drain and Watch when the Consumer is
// running a Drain or Watch already. A Consumer consumes with one session
// at a time: its claims waiting for a retry and the ledger's schedule are
// the run's. For more consumption at once, make more Consumers (each
// joins a session of its own) or raise Config.Concurrency.
var ErrAlreadyRunning = errors.New("consumer already running: one Drain or Watch at a time per Consumer")

// setSession records the running session's ID ("": none).
func (c *Consumer) setSession(id string) {
	c.mu.Lock()
	c.session = id
	c.mu.Unlock()
}

// ownSession is the running session's ID, "" when none runs.
func (c *Consumer) ownSession() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// NewConsumer returns a consumer of dir recording into l.
func NewConsumer(dir *queue.Dir, l Ledger, cfg Config) (*Consumer, error) {
	if cfg.Contract.KeyField == "" {
		cfg.Contract = DefaultContract()
	}
	if err := cfg.Contract.Check(); err != nil {
		return nil, err
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkersPerCPU * runtime.GOMAXPROCS(0)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	recordBatch := cfg.BatchSize
	if recordBatch <= 0 {
		recordBatch = DefaultRecordBatchSize
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
		if cfg.Caller != nil && !cfg.Ordered {
			cfg.BatchSize = CallerBatchSize(cfg.Concurrency)
		}
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = DefaultBatchBytes
	}
	if cfg.Lease <= 0 {
		cfg.Lease = queue.DefaultLease
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.RescanInterval <= 0 {
		cfg.RescanInterval = DefaultRescanInterval
	}
	if cfg.RecoverInterval <= 0 {
		cfg.RecoverInterval = DefaultRecoverInterval
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	if cfg.PauseAfter == 0 {
		cfg.PauseAfter = DefaultPauseAfter
	}
	if cfg.HoldInterval <= 0 {
		cfg.HoldInterval = DefaultHoldInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Consumer{dir: dir, ledger: l, cfg: cfg, log: log, recordBatch: recordBatch, writeFiles: dir.WriteStageFiles}
	c.win = newWindowGuard(cfg.Window, log, cfg.Observer)
	c.holds = newHoldWatch(c)
	if cfg.Handler != nil && cfg.Caller != nil {
		return nil, errors.New("consumer: set a Handler or a Caller, not both")
	}
	if cfg.Caller != nil {
		c.gate = newGate(cfg, log)
		if t, ok := cfg.Caller.(TimeoutCaller); ok && t.CallTimeout() >= cfg.Lease {
			return nil, fmt.Errorf("consumer: %w: %v, lease %v", ErrTimeoutBeyondLease, t.CallTimeout(), cfg.Lease)
		}
	}
	if cfg.Batch != nil {
		if cfg.Window != nil {
			// Its records are looked up in the ledger alone: a window
			// set and never asked would be a promise not kept.
			return nil, errors.New("consumer: batch files (spool.conf's format) are not deduplicated through a dedup window (--dedup) yet: their records are checked by the ledger alone; drop --dedup")
		}
		if cfg.Caller != nil {
			c.batchSlots = make(chan struct{}, cfg.Concurrency)
		}
	}
	return c, nil
}

// working reports whether business work is configured, a Handler or a
// Caller: only then may a message fail and wait for a retry, so only then
// does the ledger's retry schedule matter, and a handler's writes keep
// record transactions one at a time (recordWrites).
func (c *Consumer) working() bool {
	return c.cfg.Handler != nil || c.cfg.Caller != nil
}

// Drain consumes inbox/ until a pass finds nothing to claim, then returns.
// A Consumer runs one Drain or Watch at a time: another one started while
// it runs returns ErrAlreadyRunning at once.
// Claims left by dead consumers are recovered first, every
// Config.RecoverInterval while it runs (in the middle of a pass too), and
// again before returning, so that processing/ holds nothing of theirs
// (I5).
//
// Cancelling ctx stops it gracefully, as it stops Watch: nothing more is
// claimed; the batches being recorded are committed and moved out, and,
// with a Caller, the calls started are finished (within
// Config.ShutdownTimeout) and committed, while the claims whose call had
// not started go back to inbox/, their reservations removed, unrecorded;
// the claims waiting for a retry go back too. processing/ then holds
// nothing of this consumer's, and the error is nil: whether inbox/ was
// emptied is for the caller to look at. Calls cut short by the shutdown
// timeout are the exception: their claims stay in processing/ and their
// msg_ids reserved, for the next recovery, as after a kill, and the error
// is ErrShutdownTimeout.
func (c *Consumer) Drain(ctx context.Context) (Stats, error) {
	return c.run(ctx, false)
}

// Watch consumes inbox/ and keeps consuming new arrivals until ctx is
// cancelled, then stops as a cancelled Drain does: the work in flight is
// finished, not abandoned (unless the shutdown timeout cuts calls short:
// those are held for recovery), and what was claimed but not started goes
// back to inbox/.
func (c *Consumer) Watch(ctx context.Context) (Stats, error) {
	return c.run(ctx, true)
}

func (c *Consumer) run(ctx context.Context, watch bool) (Stats, error) {
	var st Stats
	if !c.running.CompareAndSwap(false, true) {
		return st, fmt.Errorf("consume: %w", ErrAlreadyRunning)
	}
	defer c.running.Store(false)
	// The operator's pause: a drain's ctx is cancelled by it (a graceful
	// stop), a watch waits it out (consumer_session.go).
	ctx, endHolds, err := c.watchHolds(ctx, watch)
	if err != nil {
		return st, err
	}
	if errors.Is(context.Cause(ctx), errPaused) {
		// A drain of a paused queue claims nothing, but still recovers
		// what dead consumers left (I5), as its end would.
		err = c.recover(context.WithoutCancel(ctx), &st, nil)
	} else {
		st, err = c.consume(ctx, watch)
	}
	endHolds(&st)
	return st, err
}

// runState is what the sessions of one run carry from one to the next,
// owned by consume's loop and lent to each session in turn.
type runState struct {
	st Stats
	// started is set once Config.OnStart was called.
	started bool
	// waiting: the last session could not start or was given up because
	// the ledger did not answer; a session that joins says so once more.
	waiting bool
}

// consume is run's loop of sessions.
func (c *Consumer) consume(ctx context.Context, watch bool) (Stats, error) {
	var rs runState
	st := &rs.st
	for {
		err := c.runSession(ctx, watch, &rs)
		switch {
		case ctx.Err() != nil && errors.Is(err, errJoinLease):
			// Stopped (a signal, a drain's pause) while the session was
			// taking its lease: the acquisition was cancelled, and the
			// session, which claimed nothing, is closed. A stop, not a
			// failure.
			return *st, nil
		case ctx.Err() != nil:
			return *st, err
		case errors.Is(err, ErrLeaseLost):
			// Fenced off: the session's claims were taken over while it
			// could not renew its lease (a frozen host, a partition from
			// the ledger), and the ledger commits nothing more of them.
			// Its directory is left for recovery; consuming goes on as a
			// new session.
			c.log.Warn("lost the lease: another consumer took this session's claims over, and nothing more is committed for them; joining as a new session",
				"err", err)
			continue
		case errors.Is(err, errCutOff):
			rs.waiting = true
			c.log.Warn("cut off from the ledger: this session is given up as if its lease were lost, its claims left for recovery; joining a new session once the ledger answers",
				"err", err)
		case errors.Is(err, errJoinLease) && (watch || rs.waiting):
			// The ledger does not take the new session's lease: a
			// ledger that went away (restarted, a failover, the role
			// locked) between two sessions, or at the first one. A watch
			// runs for months and waits it out, /readyz failing
			// meanwhile, as does a drain that was cut off; a drain that
			// could not start at all fails at once (exit 3), its cron
			// being the retry.
			if !rs.waiting {
				c.log.Warn("cannot start a session, the ledger does not take its lease: waiting for the ledger, retried every second",
					"err", err)
			}
			rs.waiting = true
		default:
			return *st, err
		}
		select {
		case <-ctx.Done():
			return *st, err
		case <-time.After(time.Second):
		}
	}
}

// runSession is run with one session, from its Join to its end, adding
// to rs's counts; rs.waiting, when set, is cleared (and said) once the
// session's lease is taken.
func (c *Consumer) runSession(ctx context.Context, watch bool, rs *runState) error {
	st := &rs.st
	s, err := c.dir.Join()
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	c.log.Debug("session joined", "session", s.ID())
	c.setSession(s.ID())
	defer c.setSession("")
	lease, err := c.keepLease(ctx, s)
	if err != nil {
		return c.abandon(s, fmt.Errorf("consume: %w: %w", errJoinLease, err))
	}
	if rs.waiting {
		c.log.Info("the ledger answers again: consuming as a new session", "session", s.ID())
		rs.waiting = false
	}
	defer lease.stop()
	// In-flight work finishes even when ctx is cancelled (a graceful stop),
	// so the ledger and the moves use a context that is not cancelled.
	work := context.WithoutCancel(ctx)
	// Recovery runs on a clock of its own, during passes as between them
	// (recoverer); it is stopped, and what it recovered counted, before
	// the session is closed or abandoned.
	rc := c.newRecoverer(work)
	defer rc.stop()
	// A failure while this host cannot reach the ledger ends the session,
	// not the run (see errCutOff).
	abandon := func(s *queue.Session, err error) error {
		rc.halt(st)
		return c.abandon(s, lease.classify(err))
	}
	// end ends the session by close, unless a recovery of the clock failed
	// meanwhile: its error ends the session as any recovery's does.
	end := func(close func() error) error {
		if rc.halt(st); rc.err() != nil {
			return abandon(s, rc.err())
		}
		return close()
	}
	sd := c.newStopping(ctx, work)
	defer sd.stop()
	var w *watcher
	if watch {
		w = c.watch()
		defer w.close()
	}
	if err := rc.begin(ctx, st); err != nil {
		return abandon(s, err)
	}
	for {
		if watch {
			// A watch runs for months: a stage replaced meanwhile would
			// be watched and scanned through its old descriptor forever.
			if err := c.dir.CheckStages(); err != nil {
				return abandon(s, err)
			}
		}
		if err := rc.err(); err != nil {
			return abandon(s, err)
		}
		if err := c.requeueDue(s, false); err != nil {
			return abandon(s, err)
		}
		if err := c.loadSchedule(work); err != nil {
			return abandon(s, err)
		}
		if !rs.started && c.cfg.OnStart != nil {
			c.cfg.OnStart()
		}
		rs.started = true
		c.batchWatch = watch
		claimed, err := c.pass(sd, lease, rc, work, s, st)
		st.Passes++
		back := rc.take()
		st.Recovered += back
		if err == nil {
			err = lease.err()
		}
		if err == nil {
			err = rc.err()
		}
		if err != nil {
			return abandon(s, err)
		}
		if sd.stopped() {
			return end(func() error { return c.stopped(s, lease, sd) })
		}
		if claimed > 0 || back > 0 {
			// More to claim, or the clock put claims of a dead consumer
			// back in inbox/ while this pass ran: pass again.
			continue
		}
		next, held := c.nextDue(watch)
		if watch {
			// The clock recovers what dies from now on, and its moves
			// into inbox/ ring the watch.
			if !w.wait(ctx, st, next, held, rc.failed) {
				return end(func() error { return c.close(s, lease) })
			}
			continue
		}
		// An empty pass of a drain: recover once more, in case a consumer
		// died since the clock last looked and left claims that belong
		// back in inbox/. If there were none and nothing is held, this is
		// the drain's last recovery (I5: processing/ holds nothing of
		// dead consumers' as it ends).
		n, err := rc.now(!held)
		st.Recovered += n
		if err != nil {
			return abandon(s, err)
		}
		if n > 0 {
			continue
		}
		if !held {
			st.Deferred, st.NextRetry = c.deferred()
			break
		}
		select {
		case <-ctx.Done():
			return end(func() error { return c.close(s, lease) })
		case <-rc.failed:
		case <-time.After(max(time.Until(next), 0)):
		}
	}
	if err := end(func() error { return c.close(s, lease) }); err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	return nil
}

// stopped ends a run whose context was cancelled, after a pass that
// claimed nothing more and gave back what it had not called: the claims
// waiting for a retry go back too (close). If the shutdown timeout cut
// calls short, their claims stay for recovery (leaveCut), and the error
// says so.
func (c *Consumer) stopped(s *queue.Session, lease *leaseKeeper, sd *stopping) error {
	if sd.cancelled.Load() > 0 {
		return c.leaveCut(s, lease, sd)
	}
	if err := c.close(s, lease); err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	return sd.err()
}

// close gives back the claims still waiting for a retry (so processing/ is
// left empty, I5; their attempts stay in the ledger), closes the session
// and drops its lease.
func (c *Consumer) close(s *queue.Session, lease *leaseKeeper) error {
	if err := lease.err(); err != nil {
		return c.abandon(s, err) // the claims waiting are another's now
	}
	if err := c.requeueDue(s, true); err != nil {
		return c.abandon(s, err)
	}
	if err := s.Close(); err != nil {
		return err
	}
	return lease.drop(context.Background())
}

// abandon leaves the session's claims for recovery (exactly as a crash
// would: the next Recover asks the ledger about each one) and returns err.
func (c *Consumer) abandon(s *queue.Session, err error) error {
	// Waiting claims stay in the abandoned session's directory too; the
	// next run must not try to requeue them from its own.
	c.mu.Lock()
	c.waiting = nil
	c.mu.Unlock()
	if cerr := s.Close(); cerr != nil {
		c.log.Warn("claims left for recovery", "session", s.ID(), "err", cerr)
	}
	return err
}

// item is one name of a batch, as claiming and examining left it.
type item struct {
	state itemState
	claim *queue.Claim
	// d is the delivery to record, for an examined item; r is what the
	// ledger recorded for it, once it did.
	d *Delivery
	r Result
	// claimed is when the claim began (the delivery's Claimed).
	claimed time.Time
	// called is set once the claim's external call is marked as started
	// (queue.Session.MarkCalled); the mark is cleared when it leaves.
	called bool
	// acquired: the dedup window holds the msg_id for this session, to
	// be marked done or released once the ledger decides (settleWindow);
	// absorbed: the window knew the msg_id as processed with this
	// content, so the delivery is a duplicate the ledger was not asked
	// about.
	acquired, absorbed bool
}

// itemState is what claiming and examining made of a name. Every state but
// gone counts as claimed for the pass, so that another pass follows: an
// inFlight name is still in inbox/, a held one comes back to it.
type itemState uint8

const (
	// gone: another consumer claimed the file first, or it was removed.
	gone itemState = iota
	// inFlight: this session holds a claim of the same name already
	// (queue.ErrBusy); the newer file stays in inbox/ for a later pass.
	inFlight
	// toExamine: the claim is made and waits for a worker to examine it.
	toExamine
	// held: claimed, but the message's retry is not due yet, and the
	// claim waits unrecorded in processing/ (see hold); or its msg_id is
	// held by an operator, and the claim was moved to held/ (heldAside).
	// Either way the item is done.
	held
	// examined: claimed, read and parsed into d, to be recorded.
	examined
)

// inspected is a batch claimed and inspected, waiting for its commit.
type inspected struct {
	items   []item
	claimed int
	err     error
	// synced delivers the result of making the batch's claims durable,
	// which runs while the next batch is claimed; nil when there is
	// nothing to sync.
	synced <-chan error
}

// pipeline is one pass's three stages and what they hand each other: the
// claiming stage sends batches claimed and examined to ready, the
// recording stage sends those it committed to recorded, and the finishing
// stage moves their files out of processing/.
type pipeline struct {
	c  *Consumer
	s  *queue.Session
	st *Stats // written by the recording stage only, until the pass ends
	// ctx stops the claiming when cancelled; work, never cancelled, is for
	// the ledger, so that a batch claimed is still recorded and moved.
	ctx, work context.Context
	// sd is the run's graceful stop: what a stopping pass calls, and what
	// it gives back.
	sd *stopping
	// lease holds new claims and calls while the session's lease cannot
	// be renewed.
	lease *leaseKeeper
	// rc is the session's recovery clock: its failure fails the pass,
	// and the claims it puts back into inbox/ make the scan start again.
	rc *recoverer

	ready    chan inspected
	recorded chan []item
	syncs    sync.WaitGroup // claim syncs in flight
	pf       *prefetcher

	once sync.Once
	err  error         // the pass's first failure
	stop chan struct{} // closed at the first failure
}

// pass scans inbox/ once and consumes what it can claim, as a three-stage
// pipeline so that the filesystem's work and the ledger's overlap on
// separate cores: one goroutine claims the next batch while the worker pool
// reads and parses its claims (claimAll); this one records the batch
// before it in the ledger (recordAll); a third moves the files of the
// batch before that out of processing/, only ever after their commit (I3,
// I4; finishAll). The claiming and the moving out take turns, a batch at a
// time (moves). It returns how many messages it claimed, or found in the
// way of a claim of the same name, so the caller knows whether another
// pass is needed. On a failure the claims of batches not yet recorded stay
// in the session's directory for recovery, as after a crash.
func (c *Consumer) pass(sd *stopping, lease *leaseKeeper, rc *recoverer, work context.Context, s *queue.Session, st *Stats) (int, error) {
	p := &pipeline{
		c: c, s: s, st: st, ctx: sd.ctx, work: work, sd: sd, lease: lease, rc: rc,
		ready:    make(chan inspected, 1),
		recorded: make(chan []item, 1),
		stop:     make(chan struct{}),
		pf:       c.startPrefetch(s),
	}
	// A batch file being read stops between its commits when the pass
	// is stopped (consumer_batch.go); set before the claiming stage, and
	// so its workers, start.
	c.batchStop, c.batchPass = sd.ctx, p
	// What the clock put back before this pass, its scan sees.
	rc.returned()
	// A recovery of the clock that fails fails the pass, as a failure of
	// its own would: the session ends (runSession).
	ended := make(chan struct{})
	var watching sync.WaitGroup
	watching.Go(func() {
		select {
		case <-rc.failed:
			p.fail(rc.err())
		case <-ended:
		}
	})
	defer func() {
		close(ended)
		watching.Wait()
	}()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(p.ready)
		p.claimAll()
	}()
	go func() {
		defer wg.Done()
		p.finishAll()
	}()
	claimed := p.recordAll()
	wg.Wait()
	bs := c.takeBatchStats()
	st.Processed += bs.Processed
	st.Duplicates += bs.Duplicates
	st.DeadLetters += bs.DeadLetters
	p.pf.stop(st)
	// A sync whose batch was never recorded (the pass failed) must end
	// before the session can be closed.
	p.syncs.Wait()
	return claimed, p.err
}

// fail records the pass's first failure and stops the other stages.
func (p *pipeline) fail(err error) {
	p.once.Do(func() { p.err = err; close(p.stop) })
}

// failed reports whether a stage has failed.
func (p *pipeline) failed() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}
