package spool

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/spoolq/spool/queue"
)

// The claiming stage of a pass (see the drawing in consumer.go): the scan
// of inbox/, the claims a batch at a time, the examining pool that reads
// and parses them, the sync that makes them durable, the read-ahead of a
// cold backlog, and MinAge's files left to settle.

// errStopScan ends a scan early without being an error of the run.
var errStopScan = errors.New("scan stopped")

// errRescan ends a scan early, for another to start (claimAll).
var errRescan = errors.New("scan again")

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
			held := p.c.batchHeld()
			if err := p.c.requeueDue(p.s, false); err != nil {
				return err
			}
			if held && !p.c.batchHeld() {
				// The batch file held for its records' retries is back
				// in inbox/, perhaps before the names already scanned:
				// with Ordered it must be claimed before the later
				// batch files its hold kept back (claimBatch).
				return errRescan
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

// inspectBatch claims names in order until they run out or the claimed
// files reach BatchBytes, with what their parsed fields hold beyond the
// files' bytes (parsedWeight), and has the worker pool read and parse
// each claim as soon as it is made. It returns the items of the names it
// took, a prefix of names: the rest are left in inbox/ for the next
// batch.
func (c *Consumer) inspectBatch(s *queue.Session, names []string) ([]item, int, error) {
	items := make([]item, len(names))
	toRead := make(chan int, len(names))
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		readErr error // the first claim the process could not read (examine)
		// parsed is the parsedWeight of the messages examined so far.
		parsed atomic.Int64
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
				if d := items[j].d; d != nil {
					parsed.Add(parsedWeight(d.Message))
				}
			}
		}()
	}
	taken, bytes, err := c.claimBatch(s, names, items, toRead, &parsed)
	close(toRead)
	wg.Wait()
	if bytes > 0 {
		c.parsedPerKiB.Store(parsed.Load() << 10 / bytes)
	}
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
// the claimed files reach BatchBytes with what their fields hold parsed
// (the file that crosses the bound stays in the batch) or at a failure of
// the run, and returns how many names it took and their bytes. What the
// fields hold is parsed, of the files parsed so far, or, since claims
// run ahead of the parsing, as much a byte as in the batch before.
func (c *Consumer) claimBatch(s *queue.Session, names []string, items []item, toRead chan<- int, parsed *atomic.Int64) (int, int64, error) {
	c.moves.Lock()
	defer c.moves.Unlock()
	var bytes int64
	for j, name := range names {
		if bytes+max(parsed.Load(), bytes*c.parsedPerKiB.Load()>>10) >= c.cfg.BatchBytes {
			return j, bytes, nil
		}
		if !c.oldEnough(name) {
			continue // MinAge: still being written, perhaps
		}
		if c.orderedBatches() && c.cfg.Batch.Batched(name) && c.batchHeld() {
			// A batch file begun before it waits for its records'
			// retries: its records of a key must be called before this
			// one's, so the file waits in inbox/ until that one is
			// finished (orderedBatches).
			continue
		}
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
			return j + 1, bytes, err
		}
		// The time of the claim is taken once it is made: a producer
		// still writing in place may modify the file up to its rename,
		// and its mtime must not fall after the claim (stillWriting).
		items[j] = item{state: toExamine, claim: cl, claimed: time.Now()}
		bytes += cl.Size
		toRead <- j
		if c.orderedBatches() && c.isBatch(cl) {
			// The batch ends with it: the next is claimed once the
			// examining worker has consumed it (inspectBatch waits).
			return j + 1, bytes, nil
		}
	}
	return len(names), bytes, nil
}

// parsedWeight is what m's Fields hold in memory beyond the bytes they
// come from, 0 for nil: 56 bytes a field however short, so that a
// message of many small fields weighs several times its size (a file of
// 1 MiB holds 130 000 fields of 8 bytes, 7 MiB of Fields). Without it
// in the batches' bound, 200 such files took 668 MB.
func parsedWeight(m *Message) int64 {
	if m == nil {
		return 0
	}
	return int64(cap(m.Fields)) * int64(unsafe.Sizeof(Field{}))
}

// orderedBatches reports whether batch files are consumed one at a time,
// in claim order: with Config.Ordered and a Caller, the records of one
// order key are called in file order within a file (callRun.keys) and in
// claim order across files. Two files consumed at once could not keep
// that (the later one's records of a key cannot know the earlier one's
// not read yet), so a batch file ends the batch that claims it, and
// while one is held for its records' retries no other batch file is
// claimed: its later records of a key must wait for the retry, and which
// keys it holds back is known only once it is read to its end. Claim
// order is name order (queue.Dir.ScanOrdered), but for a file that
// arrives with a name sorting before one given back to inbox/ (held for
// a retry, or recovered after a kill), which is claimed first.
func (c *Consumer) orderedBatches() bool {
	return c.cfg.Ordered && c.cfg.Caller != nil && c.cfg.Batch != nil
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

// cutShort reports whether data is empty or is the start of a JSON
// object that ends before the object could: an opening brace first (after
// a UTF-8 byte order mark and white space) and anything but a closing
// brace after the last byte that is not white space. A file that is no
// JSON object from its first byte ("not json", an array) is as wrong
// complete as half-written, and the guess would mislead.
func cutShort(data []byte) bool {
	data = bytes.Trim(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")), " \t\r\n")
	return len(data) == 0 || data[0] == '{' && data[len(data)-1] != '}'
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

// oldEnough reports whether a file of inbox/ is old enough to claim: it has
// not changed for MinAge (queue.Dir.Changed: neither its content, its size
// nor its times). One that is not yet is left in inbox/, and the time it will be old enough
// noted. A file that cannot be looked at is left to the claim, which
// finds it gone or fails as it would without MinAge.
func (c *Consumer) oldEnough(name string) bool {
	if c.cfg.MinAge <= 0 {
		return true
	}
	changed, err := c.dir.Changed(queue.Inbox, name)
	if err != nil {
		return true
	}
	now := time.Now()
	if now.Sub(changed) >= c.cfg.MinAge {
		return true
	}
	if changed.After(now) {
		changed = now // another host's clock ahead: it counts as changed now
	}
	c.young.note(changed.Add(c.cfg.MinAge))
	return false
}

// ageClock remembers the earliest time a file that MinAge held back will
// be old enough, so that a watching consumer scans again then.
type ageClock struct {
	mu  sync.Mutex
	at  time.Time
	set bool
}

func (s *ageClock) note(at time.Time) {
	s.mu.Lock()
	if !s.set || at.Before(s.at) {
		s.at, s.set = at, true
	}
	s.mu.Unlock()
}

// take returns the earliest time noted since the last take, and forgets it:
// every scan notes again the files it still holds back.
func (s *ageClock) take() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.at, s.set
	s.set = false
	return at, ok
}

// prefetcher reads ahead each chunk of inbox/ while the chunk before it
// is claimed, in a goroutine of its own, as long as the backlog is found
// cold: that is, while the session's reads or the prefetcher itself met
// files whose data had left the page cache since the chunk before. A warm
// backlog is never read ahead, so it pays nothing for it.
//
// Why: a cold file costs a worker a wait for the disk, and the pool's
// workers wait one file each; queued together by Prefetch, the same reads
// are served many at once. Measured on 100k and 1M backlogs
// (docs/PERFORMANCE.md, "Kept, and what it bought").
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
