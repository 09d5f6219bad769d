package spool

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spoolq/spool/queue"
)

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

// inspectBatch claims names in order until they run out or the claimed
// files reach BatchBytes, and has the worker pool read and parse each claim
// as soon as it is made. It returns the items of the names it took, a
// prefix of names: the rest are left in inbox/ for the next batch.
func (c *Consumer) inspectBatch(s *queue.Session, names []string) ([]item, int, error) {
	items := make([]item, len(names))
	toRead := make(chan int, len(names))
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		readErr error // the first claim the process could not read (examine)
	)
	for range min(c.cfg.Workers, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range toRead {
				var err error
				if items[j], err = c.examine(s, items[j]); err != nil {
					mu.Lock()
					readErr = cmp.Or(readErr, err)
					mu.Unlock()
				}
			}
		}()
	}
	taken, err := c.claimBatch(s, names, items, toRead)
	close(toRead)
	wg.Wait()
	// A batch with a claim left unread is not recorded: the run fails, and
	// its claims wait in processing/ for recovery.
	err = cmp.Or(err, readErr)
	items = items[:taken]
	n := 0
	for _, it := range items {
		if it.state != gone {
			n++
		}
	}
	return items, n, err
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
		if !c.oldEnough(name) {
			continue // MinAge: still being written, perhaps
		}
		start := time.Now()
		cl, err := s.Claim(name)
		switch {
		case errors.Is(err, queue.ErrGone):
			continue
		case errors.Is(err, queue.ErrBusy) && c.isWaiting(name):
			// The claim in the way waits for its retry: the newer file can
			// only be claimed once that one goes back to inbox/ (requeueDue),
			// so it is no reason to pass again at once, which would spin
			// until the retry is due.
			continue
		case errors.Is(err, queue.ErrBusy):
			items[j].state = inFlight
			continue
		case err != nil:
			return j + 1, err
		}
		items[j] = item{state: toExamine, claim: cl, claimed: start}
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
		if it.state == examined {
			return true
		}
	}
	return false
}

// examine reads and parses a claimed message and turns it into a
// delivery: valid, or rejected with its reason. Anything wrong with the
// message is a RejectError inside the delivery, never a failure of the run.
// A valid message whose retry is not due yet is held instead. The process
// running out of file descriptors or memory to read it with is no fault
// of the message: that is an error, which fails the run, and the item is
// returned as it was.
func (c *Consumer) examine(s *queue.Session, it item) (item, error) {
	cl := it.claim
	if c.isBatch(cl) {
		// Its records are consumed now, each a delivery of its own; the
		// item is then done for the pass (consumer_batch.go).
		if err := c.consumeBatch(s, cl, it.claimed); err != nil {
			return it, err
		}
		return item{state: held}, nil
	}
	d := &Delivery{Claim: cl.ID, File: cl.Name, Ino: cl.Ino, Consumer: s.ID(), Size: cl.Size, Claimed: it.claimed}
	data, rej, err := c.read(s, cl)
	if err != nil {
		return it, err
	}
	if rej == nil {
		d.Hash = ContentHash(data)
		d.Message, rej = c.parse(data)
		if rej != nil {
			c.stillWriting(s, cl, it.claimed, data, rej)
		}
	}
	d.Reject = rej
	if aside, err := c.heldAside(s, cl, d); aside || err != nil {
		if err != nil {
			return it, err
		}
		return item{state: held}, nil
	}
	if d.Message != nil {
		if due, ok := c.dueAt(d.Message.MsgID); ok && due.After(time.Now()) {
			// Its retry is not due yet: hold the claim, unrecorded.
			c.hold(cl, due)
			return item{state: held}, nil
		}
	}
	d.At = time.Now().UTC()
	return item{state: examined, claim: cl, d: d, claimed: it.claimed}, nil
}

// read returns a claimed file's content, or why it cannot be a message: a
// file that is not regular, too large or unreadable must not block the
// queue, so it is isolated as a dead letter. The process out of file
// descriptors or memory (queue.OutOfResources) is an error instead: at
// ulimit -n 24 every claim of a batch was dead-lettered as unreadable.
func (c *Consumer) read(s *queue.Session, cl *queue.Claim) ([]byte, *RejectError, error) {
	data, err := s.Read(cl, c.cfg.Contract.Limit())
	var tooLarge *queue.TooLargeError
	switch {
	case err == nil:
		return data, nil, nil
	case queue.OutOfResources(err):
		return nil, nil, err // "read NAME: too many open files"
	case errors.Is(err, queue.ErrNotRegular):
		return nil, reject(ReasonNotRegular, "", "%s, not a regular file; not opened", queue.FileType(cl.Mode)), nil
	case errors.As(err, &tooLarge):
		return nil, reject(ReasonTooLarge, "", "%s", tooLarge.Error()), nil
	}
	return nil, reject(ReasonUnreadable, "", "cannot read: %s", queue.ReadFailure(err)), nil
}

// parse validates data against the contract: a message, or why not, with
// the message's key when it has a valid one (RejectError.MsgID).
func (c *Consumer) parse(data []byte) (*Message, *RejectError) {
	msg, err := c.cfg.Contract.Parse(data)
	var rej *RejectError
	switch {
	case errors.As(err, &rej):
		rej.MsgID, _ = c.cfg.Contract.KeyOf(data)
		return nil, rej
	case err != nil:
		return nil, reject(ReasonParse, "", "%v", err)
	}
	return msg, nil
}

// stillWritingAge is how recently before its claim a file that did not
// parse may have been modified for its dead letter to say it was perhaps
// still being written: a producer writing in place under the final name,
// without --min-age, has its file taken half-written, and by the time
// anyone looks at error/ the file there is complete.
const stillWritingAge = 2 * time.Second

// stillWritingLogEvery bounds how often the log repeats the hint: once
// for a burst of such dead letters, not once a file.
const stillWritingLogEvery = time.Minute

// stillWriting adds to the detail of a parse or missing-field dead letter
// why its file may have been taken while a producer was still writing
// it: its size or modification time changed after it was read, or it was
// modified less than stillWritingAge before its claim and data, what was
// read, stops short of a JSON object's closing brace. The second is a
// guess, said as one: a file renamed into inbox/ the instant it was
// written, which --watch takes at once, is as recent; its being cut short
// is what a half-written file looks like, and a complete one with a wrong
// field does not. Other reasons say something a complete file says too.
func (c *Consumer) stillWriting(s *queue.Session, cl *queue.Claim, claimed time.Time, data []byte, rej *RejectError) {
	if rej.Reason != ReasonParse && rej.Reason != ReasonMissingField {
		return
	}
	var why string
	if changed, err := s.Changed(cl); err == nil && changed {
		why = "it changed after it was read"
	} else if age := claimed.Sub(cl.Mtime); age >= 0 && age < stillWritingAge && cutShort(data) {
		// An mtime in the future (another host's clock) says nothing.
		why = fmt.Sprintf("cut short, and modified less than %v before it was read", stillWritingAge)
	} else {
		return
	}
	rej.hint = fmt.Sprintf(" (%s: the file was still being written? see --min-age)", why)
	rej.Detail += rej.hint
}

// cutShort reports whether data is empty or ends before a JSON object
// could: anything but a closing brace after the last byte that is not
// white space.
func cutShort(data []byte) bool {
	data = bytes.TrimRight(data, " \t\r\n")
	return len(data) == 0 || data[len(data)-1] != '}'
}

// logDetail is a dead letter's detail for its log line: the whole of it,
// but for the hint of stillWriting past the first of a burst, which every
// file of a burst written in place would otherwise repeat.
func (c *Consumer) logDetail(rej *RejectError) string {
	if rej.hint == "" {
		return rej.Error()
	}
	now := time.Now().UnixNano()
	last := c.hinted.Load()
	if (last == 0 || now-last >= int64(stillWritingLogEvery)) && c.hinted.CompareAndSwap(last, now) {
		return rej.Error()
	}
	return strings.TrimSuffix(rej.Error(), rej.hint)
}
