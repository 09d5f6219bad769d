package spool

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/spoolq/spool/queue"
)

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

// examine reads and parses a claimed message and turns it into a
// delivery: valid, or rejected with its reason. Anything wrong with the
// message is a RejectError inside the delivery, never a failure of the run.
func (c *Consumer) examine(s *queue.Session, cl *queue.Claim, start time.Time) item {
	d := &Delivery{Claim: cl.ID, File: cl.Name, Ino: cl.Ino, Consumer: s.ID(), Size: cl.Size, Claimed: start}
	data, err := s.Read(cl, c.cfg.Contract.Limit())
	var tooLarge *queue.TooLargeError
	switch {
	case errors.Is(err, queue.ErrNotRegular):
		d.Reject = reject(ReasonNotRegular, "", "%s, not a regular file; not opened", queue.FileType(cl.Mode))
	case errors.As(err, &tooLarge):
		d.Reject = reject(ReasonTooLarge, "", "%s", tooLarge.Error())
	case err != nil:
		// An unreadable file must not block the queue either: isolate it.
		d.Reject = reject(ReasonParse, "", "cannot read: %v", queue.Cause(err))
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
