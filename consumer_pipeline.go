package spool

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/spoolq/spool/queue"
)

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
			if err := c.finish(s, items, st, &ms); err != nil {
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
