package spool

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/spoolq/spool/queue"
)

// The concurrency model of a run, written once. Names in it are the code's.
//
// Goroutines of a run (Drain, Watch; one per Consumer at a time):
//
//   - the run goroutine: the loop of runSession (consumer.go): the
//     recovery before the first pass and at the end of a drain
//     (recoverer.now), the claims due back to inbox/ (requeueDue), the
//     retry schedule, a pass, the wait for the next. In a pass it is the
//     recording stage (recordAll, or callAll with a Caller).
//   - the lease keeper (leaseKeeper.loop, consumer_lease.go): renews the
//     session's lease; while it cannot, claimChunk and callStage.start wait.
//   - the recovery clock (recoverer.loop, consumer_clock.go): recovers dead
//     consumers' claims every RecoverInterval, during passes as between
//     them; started after the first recovery, stopped and waited for
//     (recoverer.stop) before the session is closed or abandoned, so it
//     never sees the session's own directory unlocked. What it recovered
//     is counted in recoverer.pending (atomic), which the run goroutine
//     adds to Stats.Recovered between passes: it never writes the run's
//     Stats. It calls the Observer and, for recovered dead letters,
//     OnDelivery, concurrently with the pass (both must be safe for
//     concurrent use).
//   - the shutdown timer (newStopping, consumer_shutdown.go): a
//     context.AfterFunc that arms Config.ShutdownTimeout, then cancels
//     callCtx, the calls' context.
//   - with Watch, the watcher's notification reader (queue.Arrivals).
//
// Goroutines of a pass (pass, below):
//
//   - the failure watch: fails the pass (fail) when a recovery of the
//     clock fails (recoverer.failed); ends with the pass.
//   - the claiming stage (claimAll): scans inbox/, claims a batch at a time
//     holding moves, sends each batch on ready.
//   - the examining pool (inspectBatch, consumer_claim.go): Workers
//     goroutines per batch, reading and parsing claims from toRead.
//   - a claim sync per batch (syncClaims), its result on synced.
//   - the prefetcher (consumer_readahead.go), reading chunks ahead.
//   - the finishing stage (finishAll): moves committed files out of
//     processing/ holding moves.
//
// Without a Caller, on a ledger of k > 1 concurrent writes and with no
// Handler, the recording stage is recordAhead (consumer_recordahead.go)
// and adds:
//
//   - the record feeder, which starts each batch's transaction once no
//     transaction in flight shares a msg_id with it;
//   - one goroutine per batch's record transaction, at most k at once.
//
// With a Caller the recording stage is callAll (consumer_call.go) and adds:
//
//   - with a ledger of k > 1 concurrent writes, the reserve feeder
//     (reserveAhead), and one goroutine per batch's reserve;
//   - one goroutine per admitted delivery (callStage.start): waits for a
//     slot, the gate (pause, rate) and the lease, then calls;
//   - min(k, Concurrency) committers (settleAll), each committing the
//     finished calls as a group;
//   - handOver, which passes committed groups to the finishing stage.
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
//   moves → Consumer.mu → (leaves)
//   recoverer.mu → Consumer.recoverMu → Consumer.mu → (leaves)
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
//     Consumer.deadMu (dead sessions holding reservations), gate.mu,
//     leaseKeeper.mu, callStage.keyMu (order keys), callStage.backMu (the
//     claims given back), callStage.stMu (the pass's Stats), ageClock.mu,
//     and the shutdown timer's lock in newStopping.
//
// No lock is held while sending on a channel that can block, nor during a
// call or a ledger transaction, but moves during the renames of a batch
// and the two recovery locks during a recovery, which no stage of a pass
// waits for.

// errStopScan ends a scan early without being an error of the run.
var errStopScan = errors.New("scan stopped")

// errRescan ends a scan early, for another to start (claimAll).
var errRescan = errors.New("scan again")

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
	c.batchStop = sd.ctx
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

// claimAll is the claiming stage. Each chunk the scan of inbox/ gives is
// claimed once the scan has given the next, so that the next can be read
// ahead meanwhile. The chunk is kept as a copy: the scan's chunks share its
// window's array, which would otherwise be held through the next window's
// read, doubling what the scan holds (see queue.Dir.ScanOrdered).
//
// When the recovery clock has put claims of a dead consumer back into
// inbox/, the scan starts again from the smallest name: the scan holds
// names read before they came back, and those claims, older than most of
// the backlog, would otherwise wait for the next pass, after all of it.
// That costs a read of inbox/ per recovery that moved something, a rare
// event; the names of the chunk being claimed and of the one read ahead
// that were not claimed yet, the new scan gives again.
func (p *pipeline) claimAll() {
	for {
		var pending []string
		err := p.c.dir.ScanOrdered(queue.Inbox, func(names []string) error {
			// Retries that fell due during the pass go back to inbox/ now,
			// not at the end of a long pass.
			if err := p.c.requeueDue(p.s, false); err != nil {
				return err
			}
			names = slices.Clone(names)
			p.pf.offer(names)
			pending, names = names, pending
			return p.claimChunk(names)
		})
		if err == nil {
			err = p.claimChunk(pending)
		}
		if errors.Is(err, errRescan) {
			continue
		}
		if err != nil && !errors.Is(err, errStopScan) {
			p.fail(err)
		}
		return
	}
}

// claimChunk claims names a batch at a time and hands each batch to the
// recording stage, with the sync of its claims started; it waits while
// the lease cannot be renewed, and while the queue is paused. It returns
// errStopScan when the pass is cancelled or has failed, or after handing
// over a batch whose claiming failed, and errRescan when the recovery
// clock put claims back into inbox/.
func (p *pipeline) claimChunk(names []string) error {
	for len(names) > 0 {
		if p.ctx.Err() != nil {
			return errStopScan
		}
		if p.rc.returned() {
			return errRescan
		}
		if err := p.lease.wait(p.ctx, p.stop); err != nil {
			if errors.Is(err, ErrLeaseLost) {
				return err // the pass fails: nothing more of this session's
			}
			return errStopScan
		}
		// An operator's pause (spool pause): no claim until it ends.
		if err := p.c.holdWait(p.ctx, p.stop); err != nil {
			return errStopScan
		}
		items, claimed, err := p.c.inspectBatch(p.s, names[:min(len(names), p.c.cfg.BatchSize)])
		b := inspected{items: items, claimed: claimed, err: err}
		if err == nil && p.c.needsSync(items) {
			b.synced = p.syncClaims()
		}
		select {
		case p.ready <- b:
		case <-p.stop:
			return errStopScan
		}
		if err != nil {
			return errStopScan
		}
		names = names[len(items):]
	}
	return nil
}

// syncClaims makes the session's claims durable in a goroutine of its
// own, and returns the channel that will carry the result.
func (p *pipeline) syncClaims() <-chan error {
	synced := make(chan error, 1)
	p.syncs.Add(1)
	go func() {
		defer p.syncs.Done()
		synced <- p.s.Sync()
	}()
	return synced
}

// recordAll is the recording stage: it commits each claimed batch once its
// claims are durable and hands it to the finishing stage. After a failure
// it only drains ready, leaving the claims for recovery. It returns how
// many messages the batches claimed.
func (p *pipeline) recordAll() int {
	if p.c.callLedger != nil {
		return p.callAll()
	}
	if k := p.c.recordWrites(); k > 1 {
		return p.recordAhead(k)
	}
	claimed := 0
	for b := range p.ready {
		if p.failed() {
			continue
		}
		claimed += b.claimed
		if err := p.recordBatch(b); err != nil {
			p.fail(err)
			continue
		}
		p.committed(b.items)
	}
	close(p.recorded)
	return claimed
}

// recordBatch commits one claimed batch, once its claims are durable.
func (p *pipeline) recordBatch(b inspected) error {
	if b.err != nil {
		return b.err
	}
	if b.synced != nil {
		if err := <-b.synced; err != nil {
			return err
		}
	}
	return p.c.record(p.work, b.items, p.s.ID())
}

// committed counts the outcomes of a batch its transaction committed and
// hands the batch to the finishing stage, which moves its files out, or
// after a failure of its own leaves them, committed, for recovery.
func (p *pipeline) committed(items []item) {
	for _, it := range items {
		if it.state == examined {
			p.st.add(it.r.Outcome) // committed, whether or not its move succeeds
		}
	}
	p.recorded <- items
}

// finishAll is the finishing stage: it moves the files of each committed
// batch out of processing/, syncing the moves now and then and once more
// at the end (moveSync).
func (p *pipeline) finishAll() {
	ms := moveSync{last: time.Now()}
	for items := range p.recorded {
		if err := p.c.finish(p.s, p.lease, p.stop, items, &ms); err != nil {
			p.fail(err)
			for range p.recorded {
			}
			return
		}
	}
	if !p.c.cfg.Relaxed {
		if err := ms.sync(p.c.dir, true); err != nil {
			p.fail(err)
		}
	}
}
