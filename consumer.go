package spool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/queue"
	"golang.org/x/sys/unix"
)

// Defaults of Config.
const (
	DefaultBatchSize = 256
	// DefaultBatchBytes bounds the bytes of messages in one batch. Small
	// messages never reach it (256 of 200 bytes are 50 KiB); large ones
	// make smaller batches, so that the five batches a pass may hold at
	// once (claimed, recording, moving out, and the hand-overs between)
	// stay within tens of MiB instead of 5 × 256 × the size limit.
	DefaultBatchBytes   = 8 << 20
	DefaultPollInterval = 250 * time.Millisecond
	// DefaultWorkersPerCPU sizes the pool that reads and parses claimed
	// messages: more workers than cores, because a worker may wait in the
	// kernel on the disk. A backlog that sat for a while is no longer in the
	// page cache, so its files are read from the disk; with one worker per
	// core, every such read stalls a core's share of the pipeline. Measured
	// when the workers also claimed, on 1M-message drains whose queue had
	// partly left the cache, in three alternated pairs: 8 workers on 2
	// cores drained 36%, 26% and 4% faster than 2, with no more CPU per
	// message; on a warm queue the two are the same (README, Performance).
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
	// Zero: DefaultBatchSize. 1 gives one commit per message.
	BatchSize int
	// BatchBytes closes a batch early once the files claimed into it reach
	// this many bytes; the file that crosses the bound stays in the batch,
	// so a batch always holds at least one message. Zero:
	// DefaultBatchBytes.
	BatchBytes int64
	// Lease is how long a session of another host may go silent before its
	// claims are taken over. Zero: queue.DefaultLease.
	Lease time.Duration
	// PollInterval is how often Watch looks at an empty inbox.
	// Zero: DefaultPollInterval.
	PollInterval time.Duration
	// Handler, when set, does the business work of each message inside the
	// ledger transaction; the ledger must then be a WorkLedger. Nil: the
	// ledger's processed row is the only work.
	Handler Handler
	// Retry is the backoff policy for the handler's transient failures.
	Retry Retry
	// Relaxed skips the directory fsyncs around each batch. Pair it with a
	// relaxed ledger: a power cut may then lose the last batches' records or
	// moves (a crash of the process loses nothing). Never the default.
	Relaxed bool
	// Logger receives operational events. Nil: discard.
	Logger *slog.Logger
	// OnDelivery, when set, is called after each delivery has reached done/
	// or error/, with the name it got there; for progress and metrics. It
	// must be quick and safe for concurrent use.
	OnDelivery func(d *Delivery, stored string)
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
	// ColdReads counts claimed messages whose data had left the page cache
	// when a worker read them, so that it waited for the disk. ReadAhead
	// counts the messages found so before their claim, whose reads were
	// queued at once while the backlog was cold (see prefetcher).
	ColdReads, ReadAhead int
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
	work   WorkLedger // the ledger, when a Handler is configured
	cfg    Config
	log    *slog.Logger

	// moves is held by whichever stage of a pass is renaming files, the
	// claiming or the finishing, for a whole batch at a time. The kernel
	// runs the cross-directory renames of one filesystem one at a time
	// (Linux's s_vfs_rename_mutex), so a second thread renaming at once
	// gains nothing: it spins on that lock, on a core the reads, parsing
	// and ledger could have used (README, Performance).
	moves sync.Mutex

	// waiting are claims held in processing/ until their retry is due;
	// schedule is the ledger's retry schedule as of the current pass.
	mu       sync.Mutex
	waiting  []waiting
	schedule map[string]time.Time
}

// waiting is a claim held until its next attempt is due. It stays in the
// session's directory, invisible to other consumers and blocking nobody;
// when due it goes back to inbox/ to be claimed again. If the consumer dies
// meanwhile, recovery puts it back (its claim was never recorded) and the
// ledger still holds its attempt count.
type waiting struct {
	claim *queue.Claim
	due   time.Time
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
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
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
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Consumer{dir: dir, ledger: l, cfg: cfg, log: log}
	if cfg.Handler != nil {
		wl, ok := l.(WorkLedger)
		if !ok {
			return nil, fmt.Errorf("consumer: a handler needs a ledger that runs work in its transaction (%T does not)", l)
		}
		c.work = wl
	}
	return c, nil
}

// Drain consumes inbox/ until a pass finds nothing to claim, then returns.
// Claims left by dead consumers are recovered first and again before
// returning, so that processing/ holds nothing of theirs (I5).
func (c *Consumer) Drain(ctx context.Context) (Stats, error) {
	return c.run(ctx, false)
}

// Watch consumes inbox/ and keeps consuming new arrivals until ctx is
// cancelled; the batch in flight is finished, not abandoned.
func (c *Consumer) Watch(ctx context.Context) (Stats, error) {
	return c.run(ctx, true)
}

func (c *Consumer) run(ctx context.Context, watch bool) (Stats, error) {
	var st Stats
	s, err := c.dir.Join()
	if err != nil {
		return st, fmt.Errorf("consume: %w", err)
	}
	c.log.Debug("session joined", "session", s.ID())
	stopLease := c.renewLease(s)
	defer stopLease()
	// In-flight work finishes even when ctx is cancelled (Watch's shutdown),
	// so the ledger and the moves use a context that is not cancelled.
	work := context.WithoutCancel(ctx)
	for {
		if err := c.recover(work, &st); err != nil {
			return st, c.abandon(s, err)
		}
		if err := c.release(s, false); err != nil {
			return st, c.abandon(s, err)
		}
		if err := c.loadSchedule(work); err != nil {
			return st, c.abandon(s, err)
		}
		claimed, err := c.pass(ctx, work, s, &st)
		if err != nil {
			return st, c.abandon(s, err)
		}
		if claimed > 0 {
			continue
		}
		// An empty pass: recover once more, in case a consumer died while
		// we ran and left claims that belong back in inbox/.
		before := st.Recovered
		if err := c.recover(work, &st); err != nil {
			return st, c.abandon(s, err)
		}
		if st.Recovered > before {
			continue
		}
		next, held := c.nextDue()
		if !watch && !held {
			break
		}
		wait := c.cfg.PollInterval
		if held && (!watch || time.Until(next) < wait) {
			wait = max(time.Until(next), 0)
		}
		select {
		case <-ctx.Done():
			return st, c.close(s)
		case <-time.After(wait):
		}
	}
	if err := c.close(s); err != nil {
		return st, fmt.Errorf("consume: %w", err)
	}
	return st, nil
}

// close gives back the claims still waiting for a retry (so processing/ is
// left empty, I5; their attempts stay in the ledger) and closes the session.
func (c *Consumer) close(s *queue.Session) error {
	if err := c.release(s, true); err != nil {
		return c.abandon(s, err)
	}
	return s.Close()
}

// release moves the waiting claims that are due, or all of them, back to
// inbox/.
func (c *Consumer) release(s *queue.Session, all bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	keep := c.waiting[:0]
	var errs []error
	for _, w := range c.waiting {
		if !all && w.due.After(now) {
			keep = append(keep, w)
			continue
		}
		if _, err := s.Finish(w.claim, queue.Inbox); err != nil {
			errs = append(errs, err)
			keep = append(keep, w)
		}
	}
	c.waiting = keep
	if len(errs) > 0 {
		return fmt.Errorf("release waiting claims: %w", errors.Join(errs...))
	}
	return nil
}

// nextDue returns the earliest due time of the waiting claims.
func (c *Consumer) nextDue() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	for i, w := range c.waiting {
		if i == 0 || w.due.Before(next) {
			next = w.due
		}
	}
	return next, len(c.waiting) > 0
}

func (c *Consumer) hold(cl *queue.Claim, due time.Time) {
	c.mu.Lock()
	c.waiting = append(c.waiting, waiting{claim: cl, due: due})
	c.mu.Unlock()
}

// loadSchedule reads the ledger's retry schedule, so that a message claimed
// before its retry is due (after a restart, or from another consumer) is
// held rather than tried early.
func (c *Consumer) loadSchedule(ctx context.Context) error {
	if c.work == nil {
		return nil
	}
	sched, err := c.work.RetrySchedule(ctx)
	if err != nil {
		return fmt.Errorf("load retry schedule: %w", err)
	}
	c.mu.Lock()
	c.schedule = sched
	c.mu.Unlock()
	return nil
}

// dueAt returns when a msg_id may next be tried, if it waits for a retry.
func (c *Consumer) dueAt(msgID string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.schedule[msgID]
	return t, ok
}

// abandon leaves the session's claims for recovery (exactly as a crash
// would: the next Recover asks the ledger about each one) and returns err.
func (c *Consumer) abandon(s *queue.Session, err error) error {
	// Waiting claims stay in the abandoned session's directory too; the
	// next run must not try to release them from its own.
	c.mu.Lock()
	c.waiting = nil
	c.mu.Unlock()
	if cerr := s.Close(); cerr != nil {
		c.log.Warn("claims left for recovery", "session", s.ID(), "err", cerr)
	}
	return err
}

func (c *Consumer) renewLease(s *queue.Session) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(c.cfg.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := s.Touch(); err != nil {
					c.log.Warn("lease renewal failed", "err", err)
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (c *Consumer) recover(ctx context.Context, st *Stats) error {
	rec, err := c.dir.Recover(ctx, c.resolve, c.cfg.Lease)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	if rec.Total() > 0 {
		c.log.Info("recovered claims of dead consumers", "sessions", rec.Sessions,
			"to_inbox", rec.ToInbox, "to_done", rec.ToDone, "to_error", rec.ToError)
	}
	st.Recovered += rec.Total()
	return nil
}

// resolve maps a recorded claim to the stage its outcome sends it to; an
// unrecorded claim goes back to inbox/ to be consumed as a new claim (I7).
// The file is read and parsed again for its msg_id, by which the ledger
// finds a processed claim; a file that does not parse was a dead letter,
// found by its claim alone.
func (c *Consumer) resolve(ctx context.Context, orphan *queue.Orphan) (queue.Stage, error) {
	var msgID string
	data, err := orphan.Read(c.cfg.Contract.Limit())
	var tooLarge *queue.TooLargeError
	switch {
	case err == nil:
		if msg, err := c.cfg.Contract.Parse(data); err == nil {
			msgID = msg.MsgID
		}
	case errors.Is(err, queue.ErrNotRegular), errors.As(err, &tooLarge):
	default:
		// Unreadable now: it was a dead letter if it was unreadable then
		// too, and its claim finds it.
		c.log.Warn("recovery cannot read a claim; looking it up by claim alone",
			"file", orphan.Name(), "claim", orphan.ID, "err", err)
	}
	o, ok, err := c.ledger.ClaimOutcome(ctx, orphan.ID, msgID)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return queue.Inbox, nil
	case o == OutcomeDeadLetter:
		return queue.Error, nil
	default:
		return queue.Done, nil
	}
}

// errStopScan ends a scan early without being an error of the run.
var errStopScan = errors.New("scan stopped")

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

// pass scans inbox/ once and consumes what it can claim, as a three-stage
// pipeline so that the filesystem's work and the ledger's overlap on
// separate cores: one goroutine claims the next batch while the worker pool
// reads and parses its claims; this one records the batch before it in the
// ledger; a third moves the files of the batch before that out of
// processing/, only ever after their commit (I3, I4). The claiming and the
// moving out take turns, a batch at a time (moves). It returns how many
// messages it claimed, or found in the way of a claim of the same name, so
// the caller knows whether another pass is needed. On a failure the claims
// of batches not yet recorded stay in the session's directory for
// recovery, as after a crash.
func (c *Consumer) pass(ctx, work context.Context, s *queue.Session, st *Stats) (int, error) {
	var (
		once    sync.Once
		failErr error
		stop    = make(chan struct{})
	)
	fail := func(err error) {
		once.Do(func() { failErr = err; close(stop) })
	}
	ready := make(chan inspected, 1)
	var syncs sync.WaitGroup // claim syncs in flight
	recorded := make(chan []item, 1)
	pf := c.startPrefetch(s)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(ready)
		claimChunk := func(names []string) error {
			for len(names) > 0 {
				if ctx.Err() != nil {
					return errStopScan
				}
				items, claimed, err := c.inspectBatch(s, names[:min(len(names), c.cfg.BatchSize)])
				var synced chan error
				if err == nil && c.needsSync(items) {
					synced = make(chan error, 1)
					syncs.Add(1)
					go func() {
						defer syncs.Done()
						synced <- s.Sync()
					}()
				}
				select {
				case ready <- inspected{items, claimed, err, synced}:
				case <-stop:
					return errStopScan
				}
				if err != nil {
					return errStopScan
				}
				names = names[len(items):]
			}
			return nil
		}
		// Each chunk the scan gives is claimed once the scan has given the
		// next, so that the next can be read ahead meanwhile. The chunk is
		// kept as a copy: the scan's chunks share its window's array, which
		// would otherwise be held through the next window's read, doubling
		// what the scan holds (see queue.Dir.ScanOrdered).
		var pending []string
		err := c.dir.ScanOrdered(queue.Inbox, func(names []string) error {
			// Retries that fell due during the pass go back to inbox/ now,
			// not at the end of a long pass.
			if err := c.release(s, false); err != nil {
				return err
			}
			names = slices.Clone(names)
			pf.offer(names)
			pending, names = names, pending
			return claimChunk(names)
		})
		if err == nil {
			err = claimChunk(pending)
		}
		if err != nil && !errors.Is(err, errStopScan) {
			fail(err)
		}
	}()
	go func() {
		defer wg.Done()
		ms := moveSync{last: time.Now()}
		for items := range recorded {
			if err := c.finish(s, items, &ms); err != nil {
				fail(err)
				for range recorded {
				}
				return
			}
		}
		if !c.cfg.Relaxed {
			if err := ms.sync(c.dir, true); err != nil {
				fail(err)
			}
		}
	}()
	claimed := 0
	for b := range ready {
		select {
		case <-stop:
			continue // leave the claims for recovery
		default:
		}
		claimed += b.claimed
		err := b.err
		if err == nil && b.synced != nil {
			err = <-b.synced
		}
		if err == nil {
			err = c.record(work, b.items)
		}
		if err != nil {
			fail(err)
			continue
		}
		for _, it := range b.items {
			if it.d != nil {
				st.add(it.d.Outcome) // committed, whether or not its move succeeds
			}
		}
		recorded <- b.items
	}
	close(recorded)
	wg.Wait()
	pf.stop(st)
	// A sync whose batch was never recorded (the pass failed) must end
	// before the session can be closed.
	syncs.Wait()
	return claimed, failErr
}

// prefetcher reads ahead each chunk of inbox/ while the chunk before it
// is claimed, in a goroutine of its own, as long as the backlog is found
// cold: that is, while the session's reads or the prefetcher itself met
// files whose data had left the page cache since the chunk before. A warm
// backlog is never read ahead, so it pays nothing for it.
//
// Why: a cold file costs a worker a wait for the disk, and the pool's
// workers wait one file each; queued together by Prefetch, the same reads
// are served many at once. Measured on 100k and 1M backlogs (README,
// "Reading a cold backlog ahead").
type prefetcher struct {
	s      *queue.Session
	chunks chan []string
	done   chan struct{}
	cold   atomic.Int64 // cold files the prefetcher met
	seen   int64        // cold reads and finds counted at the last offer
	// coldBefore is the session's ColdReads when the pass began.
	coldBefore int64
}

func (c *Consumer) startPrefetch(s *queue.Session) *prefetcher {
	p := &prefetcher{s: s, chunks: make(chan []string, 1), done: make(chan struct{}), coldBefore: s.ColdReads()}
	p.seen = p.coldBefore
	go func() {
		defer close(p.done)
		limit := c.cfg.Contract.Limit()
		for names := range p.chunks {
			p.cold.Add(int64(c.dir.Prefetch(queue.Inbox, names, limit)))
		}
	}()
	return p
}

// offer has the chunk read ahead if files were found cold since the last
// offer. It never waits: the chunk is queued behind the one being read
// ahead, or skipped if another is queued already.
func (p *prefetcher) offer(names []string) {
	cold := p.s.ColdReads() + p.cold.Load()
	if cold == p.seen {
		return
	}
	p.seen = cold
	select {
	case p.chunks <- names:
	default:
	}
}

// stop ends the prefetching of a pass and adds what it saw to st.
func (p *prefetcher) stop(st *Stats) {
	close(p.chunks)
	<-p.done
	st.ColdReads += int(p.s.ColdReads() - p.coldBefore)
	st.ReadAhead += int(p.cold.Load())
}

type item struct {
	claim *queue.Claim
	d     *Delivery
	busy  bool
	// claimed is when the claim began (the delivery's Claimed).
	claimed time.Time
}

// inspectBatch claims names in order until they run out or the claimed
// files reach BatchBytes, and has the worker pool read and parse each claim
// as soon as it is made. It returns the items of the names it took, a
// prefix of names: the rest are left in inbox/ for the next batch.
func (c *Consumer) inspectBatch(s *queue.Session, names []string) ([]item, int, error) {
	items := make([]item, len(names))
	toRead := make(chan int, len(names))
	var wg sync.WaitGroup
	for range min(c.cfg.Workers, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range toRead {
				items[j] = c.examine(s, items[j].claim, items[j].claimed)
			}
		}()
	}
	taken, err := c.claimBatch(s, names, items, toRead)
	close(toRead)
	wg.Wait()
	items = items[:taken]
	claimed := 0
	for _, it := range items {
		if it.busy || it.d != nil {
			claimed++
		}
	}
	return items, claimed, err
}

// claimBatch claims names one after another, in this goroutine, sending
// the index of each claim to toRead. It stops when the names run out, when
// the claimed files reach BatchBytes (the file that crosses the bound stays
// in the batch) or at a failure of the run, and returns how many names it
// took.
func (c *Consumer) claimBatch(s *queue.Session, names []string, items []item, toRead chan<- int) (int, error) {
	c.moves.Lock()
	defer c.moves.Unlock()
	var bytes int64
	for j, name := range names {
		if bytes >= c.cfg.BatchBytes {
			return j, nil
		}
		start := time.Now()
		cl, err := s.Claim(name)
		switch {
		case errors.Is(err, queue.ErrGone):
			continue
		case errors.Is(err, queue.ErrBusy):
			items[j].busy = true
			continue
		case err != nil:
			return j + 1, err
		}
		items[j].claim, items[j].claimed = cl, start
		bytes += cl.Size
		toRead <- j
	}
	return len(names), nil
}

// needsSync reports whether a batch's claims must be made durable before
// the ledger names them: otherwise a power cut could undo a claim whose
// outcome is then committed, and the message would come back as a
// duplicate of itself. The sync (of the session's directory) runs while
// the next batch is claimed, and the ledger stage waits for it: off both
// critical paths when the disk keeps up.
func (c *Consumer) needsSync(items []item) bool {
	if c.cfg.Relaxed {
		return false
	}
	for _, it := range items {
		if it.d != nil {
			return true
		}
	}
	return false
}

// record commits a batch's deliveries in one ledger transaction. The caller
// has waited for the batch's claims to be durable first (needsSync).
func (c *Consumer) record(ctx context.Context, items []item) error {
	batch := make([]*Delivery, 0, len(items))
	for _, it := range items {
		if it.d != nil {
			batch = append(batch, it.d)
		}
	}
	if len(batch) == 0 {
		return nil
	}
	var err error
	if c.work != nil {
		err = c.work.RecordWork(ctx, batch, Work{Handler: c.cfg.Handler, Retry: c.cfg.Retry})
	} else {
		err = c.ledger.Record(ctx, batch)
	}
	if err != nil {
		return fmt.Errorf("ledger: %w", err) // the ledger names the operation
	}
	return nil
}

// moveSyncInterval is how often the moves out of processing/ are made
// durable while a pass runs; a pass also syncs them when it ends.
//
// Why not after every batch, as the claims and the ledger commit are: a
// move lost to a power cut leaves its file in the session directory, where
// recovery finds it and asks the ledger, which committed its outcome before
// the move (I3, I4), so the file is finished the same way. A sync per batch
// bought nothing but one more journal commit per batch (on ext4, a
// directory fsync commits the whole journal); once a second bounds what a
// power cut sends back through recovery.
const moveSyncInterval = time.Second

// moveSync remembers which stages received files since they were last
// synced, for the finishing stage of a pass.
type moveSync struct {
	last            time.Time
	toDone, toError bool
}

// sync makes the moves durable if force is set or the interval has passed.
func (m *moveSync) sync(d *queue.Dir, force bool) error {
	if !force && time.Since(m.last) < moveSyncInterval {
		return nil
	}
	var stages []queue.Stage
	if m.toDone {
		stages = append(stages, queue.Done)
	}
	if m.toError {
		stages = append(stages, queue.Error)
	}
	m.last, m.toDone, m.toError = time.Now(), false, false
	return d.Sync(stages...)
}

// finish moves the files of a recorded batch to done/ or error/. I3/I4: it
// runs only after record committed the batch.
func (c *Consumer) finish(s *queue.Session, items []item, ms *moveSync) error {
	if err := c.moveOut(s, items, ms); err != nil {
		return err
	}
	if c.cfg.Relaxed {
		return nil
	}
	return ms.sync(c.dir, false)
}

// moveOut does finish's renames, holding moves.
func (c *Consumer) moveOut(s *queue.Session, items []item, ms *moveSync) error {
	c.moves.Lock()
	defer c.moves.Unlock()
	for _, it := range items {
		if it.d == nil {
			continue
		}
		if it.d.Outcome == OutcomeRetry {
			c.hold(it.claim, it.d.RetryAt)
			c.log.Info("retry scheduled", "file", it.d.File, "msg_id", it.d.Message.MsgID,
				"attempt", it.d.Attempts, "at", it.d.RetryAt, "err", it.d.Err)
			continue
		}
		to := queue.Done
		if it.d.Outcome == OutcomeDeadLetter {
			to, ms.toError = queue.Error, true
		} else {
			ms.toDone = true
		}
		stored, err := s.Finish(it.claim, to)
		if err != nil {
			return err
		}
		if it.d.Outcome == OutcomeDeadLetter {
			c.log.Info("dead letter", "file", it.d.File, "stored", stored, "reason", it.d.Reject.Reason, "detail", it.d.Reject.Error())
		}
		if c.cfg.OnDelivery != nil {
			c.cfg.OnDelivery(it.d, stored)
		}
	}
	return nil
}

// examine reads and parses a claimed message and turns it into a
// delivery: valid, or rejected with its reason. Anything wrong with the
// message is a RejectError inside the delivery, never a failure of the run.
func (c *Consumer) examine(s *queue.Session, cl *queue.Claim, start time.Time) item {
	d := &Delivery{Claim: cl.ID, File: cl.Name, Ino: cl.Ino, Consumer: s.ID(), Size: cl.Size, Claimed: start}
	data, err := s.Read(cl, c.cfg.Contract.Limit())
	var tooLarge *queue.TooLargeError
	switch {
	case errors.Is(err, queue.ErrNotRegular):
		d.Reject = reject(ReasonNotRegular, "", "%s, not a regular file; not opened", fileType(cl.Mode))
	case errors.As(err, &tooLarge):
		d.Reject = reject(ReasonTooLarge, "", "%s", tooLarge.Error())
	case err != nil:
		// An unreadable file must not block the queue either: isolate it.
		d.Reject = reject(ReasonUnreadable, "", "cannot read: %s", readFailure(err))
	default:
		sum := sha256.Sum256(data)
		d.Hash = hex.EncodeToString(sum[:])
		msg, err := c.cfg.Contract.Parse(data)
		var rej *RejectError
		switch {
		case errors.As(err, &rej):
			d.Reject = rej
		case err != nil:
			d.Reject = reject(ReasonParse, "", "%v", err)
		default:
			d.Message = msg
			if due, ok := c.dueAt(msg.MsgID); ok && due.After(time.Now()) {
				// Its retry is not due yet: hold the claim, unrecorded.
				c.hold(cl, due)
				return item{busy: true}
			}
		}
	}
	d.At = time.Now().UTC()
	return item{claim: cl, d: d}
}

func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return "special file"
}

func unwrapErrno(err error) error {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}
