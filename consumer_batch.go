package spool

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spoolq/spool/queue"
)

// A batch file (Config.Batch) is claimed as one file, as any message is,
// and then consumed here, in the examining worker that took its claim,
// record by record (docs/DESIGN.md, "Batch files: the consumer"):
//
//   - its records are recorded BatchSize at a time (without a Handler or
//     a Caller, DefaultRecordBatchSize unless BatchSize is set), in file
//     order, each a delivery of its own whose claim is the file's batch
//     identity, "#" and the record's index, and whose file column names
//     its origin ("orders.csv#L17");
//   - the transaction that commits them also writes the file's progress,
//     the position after the last of them (Ledger.RecordBatch), so
//     that a consumer killed anywhere resumes where it stopped: its claim
//     goes back to inbox/ by recovery, as an unrecorded claim does, and
//     the next claim of the same file (name, inode, size, modification
//     time) finds the progress and reads on from there;
//   - a record that cannot be read or breaks the contract is written to
//     error/ as a one-record file before the transaction that records its
//     dead letter with that file's name and inode; after a crash between
//     the two, the resumed run finds the file it wrote (same name or a
//     collision name of it, same bytes, an inode no dead letter is
//     recorded with) and records that one instead of writing another;
//   - once every record is committed the file goes to done/, and its
//     done-file with it. A file that cannot be read at all goes to error/
//     whole, its claim recorded as one dead letter, as ever.
//
// The examining pool waits for it, so a batch file holds up the claims of
// its batch: records, not files, are what a batch file's throughput is
// made of.

// batchFileID identifies a claimed data file whatever its stage: the
// progress key, which a claim given back to inbox/ and claimed again
// keeps (its claim identity changes with the rename's change time).
func batchFileID(cl *queue.Claim) string {
	return cl.Name + ":" + strconv.FormatUint(cl.Ino, 10) + ":" + strconv.FormatInt(cl.Size, 10) + ":" + strconv.FormatInt(cl.Mtime.UnixNano(), 10)
}

// isBatch reports whether a claim is consumed as a batch file.
func (c *Consumer) isBatch(cl *queue.Claim) bool {
	return c.cfg.Batch != nil && cl.Regular() && c.cfg.Batch.Batched(cl.Name)
}

// batchRecord is a record of the pending chunk, with how to write its
// dead letter should its handler dead-letter it.
type batchRecord struct {
	d   *Delivery
	rec BatchRecord
	// stored is the dead letter's name in error/, once written.
	stored string
	// unwritten is the content of a dead letter to write before the
	// chunk's commit (writeDeadLetters), or, with streamed, nil: a dead
	// letter too large to hold, which rec.WriteDeadLetter writes from the
	// batch file. Both are cleared once it is written.
	unwritten []byte
	streamed  bool
	// absorbed marks a record of a resumed file that a killed run settled
	// already, with a Caller, past the progress it committed: it is not
	// recorded nor called again (settledBefore). absorbedAs is what it
	// was settled as, for the file's counts.
	absorbed   bool
	absorbedAs Outcome
}

// batchRun is the consumption of one claimed batch file.
type batchRun struct {
	c  *Consumer
	s  *queue.Session
	cl *queue.Claim
	// done is cl's done-file, claimed with it (claimDoneFile); nil when
	// it has none.
	done    *queue.Claim
	claimed time.Time
	p       BatchProgress
	pending []batchRecord
	// resumed says the file had a progress row when claimed: with a
	// Caller, records past the progress may be settled already.
	resumed bool
	// recorded says the file has a progress row: it had one, or a commit
	// wrote it.
	recorded bool
	// rd reads the file; finish asks it for its Note (batchNoter).
	rd BatchReader
	// settled and dead count this run's records settled (processed or
	// duplicates) and dead-lettered, and firstDead says why the first
	// dead letter was: a file of dead letters alone is worth a word.
	settled, dead int
	firstDead     string
}

// consumeBatch consumes the claimed batch file cl. An error fails the
// run, and leaves the claim, with the progress committed so far, for
// recovery.
func (c *Consumer) consumeBatch(s *queue.Session, cl *queue.Claim, claimed time.Time) error {
	ctx := context.Background() // a file begun is committed as far as it can be
	done, err := c.claimDoneFile(s, cl)
	if err != nil {
		return err
	}
	if !c.cfg.Relaxed {
		// The claim durable before the ledger names it (needsSync).
		if err := s.Sync(); err != nil {
			return err
		}
	}
	file := batchFileID(cl)
	p, found, err := c.ledger.BatchProgress(ctx, file)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	recorded := found
	if !found {
		p = BatchProgress{File: file, Batch: cl.ID}
		if c.cfg.Caller != nil {
			// With a Caller records are settled before the progress
			// passes them: the row first, so that a file an earlier run
			// settled records of is known as resumed (settledBefore,
			// writeUnwritten), and a fresh one is looked up in nothing.
			if _, err := c.ledger.RecordBatch(ctx, nil, Work{}, p); err != nil {
				return fmt.Errorf("ledger: %w", err)
			}
			recorded = true
		}
	}
	f, err := s.Open(cl)
	if err != nil {
		return err
	}
	defer f.Close() // read-only: a close error loses nothing
	rd, err := c.cfg.Batch.OpenBatch(f, cl.Name, p.Position)
	if err != nil {
		return fmt.Errorf("consume batch file %s: %w", cl.Name, err)
	}
	b := &batchRun{c: c, s: s, cl: cl, done: done, claimed: claimed, p: p, resumed: found, recorded: recorded, rd: rd}
	if found {
		n, err := b.writeUnwritten(ctx)
		if err != nil {
			return err
		}
		c.log.Info("batch file resumed", "file", cl.Name, "position", p.Position, "dead_letters_written", n)
	}
	// Read ahead: the next chunk is read, parsed and its dead letters
	// written while this one commits (readChunks), and the chunks are
	// committed in file order, each with the position after its last
	// record.
	chunks, quit, exited := make(chan batchChunk), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		b.readChunks(ctx, rd, chunks, quit)
	}()
	stopReading := func() {
		if quit != nil {
			close(quit)
			<-exited // the reader uses the file and writes into error/
			quit = nil
		}
	}
	defer stopReading()
	if c.cfg.Caller != nil {
		return b.callAll(ctx, chunks, stopReading)
	}
	for ch := range chunks {
		switch {
		case ch.err != nil:
			return ch.err
		case ch.whole != nil:
			return b.whole(ctx, *ch.whole)
		}
		b.pending = ch.recs
		if len(ch.recs) > 0 {
			b.p.Position = ch.position
		}
		if err := b.commit(ctx); err != nil {
			return err
		}
		if ch.last {
			if err := b.recordEmpty(ctx); err != nil {
				return err
			}
			return b.finish(queue.Done)
		}
	}
	// The reader stopped short for a graceful stop, once what it had
	// read was sent and committed: the rest of the file waits for the
	// next run, which resumes after it.
	stopReading()
	return b.giveBack()
}

// batchChunk is what readChunks hands the committing goroutine: a chunk of
// records with the position after its last, or the file's end (last),
// a whole-file failure, or an error that fails the run.
type batchChunk struct {
	recs     []batchRecord
	position string
	last     bool
	whole    *BatchRecord
	err      error
}

// readChunks reads rd to its end in chunks of BatchSize records (without
// a Handler or a Caller, recordBatch records or BatchBytes of them), each
// record made a delivery (add) and the chunk's dead letters written
// (writeDeadLetters) before it is sent, and sends
// them in file order on chunks, which it closes; it stops early once
// quit is closed. It runs beside the commits of the chunks before: their
// order, and each chunk's position, are the file's. On a graceful stop
// (batchStop), once a first chunk is sent, it sends the records it holds
// as a chunk of their own and stops: every dead letter it wrote is in a
// chunk sent, which the committing goroutine commits before it gives the
// file back.
func (b *batchRun) readChunks(ctx context.Context, rd BatchReader, chunks chan<- batchChunk, quit <-chan struct{}) {
	defer close(chunks)
	send := func(ch batchChunk) bool {
		select {
		case chunks <- ch:
			return true
		case <-quit:
			return false
		}
	}
	// flush writes ch's dead letters and sends it. A dead letter too
	// large for the room left sets the file aside instead (noRoom): the
	// records before it are sent, then the file's whole failure.
	flush := func(ch batchChunk) bool {
		err := b.writeDeadLetters(&ch)
		var nr *noRoom
		switch {
		case errors.As(err, &nr):
			head := batchChunk{recs: ch.recs[:nr.i]}
			if nr.i > 0 {
				head.position = ch.recs[nr.i-1].rec.After
				if err := b.writeDeadLetters(&head); err != nil {
					send(batchChunk{err: err})
					return false
				}
				if !send(head) {
					return false
				}
			}
			send(batchChunk{whole: &nr.whole})
			return false
		case err != nil:
			send(batchChunk{err: err})
			return false
		}
		return send(ch)
	}
	size, limit := b.c.recordChunk()
	stop := b.c.batchStop
	var ch batchChunk
	var held int64 // the bytes of ch's records, against limit
	sent := false
	for {
		if sent && stop != nil && stop.Err() != nil {
			flush(ch)
			return
		}
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			send(batchChunk{err: fmt.Errorf("consume batch file %s: %w", b.cl.Name, err)})
			return
		}
		if rec.Whole {
			send(batchChunk{whole: &rec})
			return
		}
		br, err := b.add(ctx, rec)
		if err != nil {
			send(batchChunk{err: err})
			return
		}
		ch.recs = append(ch.recs, br)
		ch.position = rec.After
		held += br.weight()
		if len(ch.recs) >= size || (limit > 0 && held >= limit) {
			if !flush(ch) {
				return
			}
			sent = true
			ch, held = batchChunk{recs: make([]batchRecord, 0, size)}, 0
		}
	}
	ch.last = true
	flush(ch)
}

// recordChunk is the most records of a chunk of readChunks, and the
// weight of records (batchRecord.weight) that closes one early: without
// a Handler or a Caller, recordBatch and BatchBytes; with one, BatchSize
// (the calls' window and a handler's transaction are sized by it) and
// BatchBytes. Records of a few hundred KiB, or a CSV row of 100 000
// columns, made 256 of them 3 GB in memory with --sql before the chunk
// was bounded by weight with a Handler too.
func (c *Consumer) recordChunk() (int, int64) {
	if c.cfg.Caller == nil && c.cfg.Handler == nil {
		return max(1, c.recordBatch), c.cfg.BatchBytes
	}
	return max(1, c.cfg.BatchSize), c.cfg.BatchBytes
}

// weight is about what br holds in memory: the record's JSON, and as
// much again for its bytes as read and the strings of its Message; its
// dead letter not yet written; and its Message's Fields (parsedWeight).
func (br *batchRecord) weight() int64 {
	return int64(2*len(br.rec.JSON)+len(br.unwritten)) + parsedWeight(br.d.Message)
}

// writeDeadLetters writes the dead letters of ch that add left to write,
// all at once (Dir.WriteStageFiles: every file written and synced, four
// at once, then all renamed into error/, then the directories synced
// once), before the chunk goes to its commit, and names them in their
// deliveries. I3: a dead letter is recorded only by a commit after its
// file is durable. On an error some may be written: a dead letter's file
// is looked for before it is written again (lookDeadLetter).
func (b *batchRun) writeDeadLetters(ch *batchChunk) error {
	var files []queue.StageFile
	var which []int
	for i := range ch.recs {
		br := &ch.recs[i]
		if br.streamed {
			// Read from the batch file, on this goroutine, the reader's:
			// WriteStageFiles fills its files at once.
			stored, ino, err := b.writeDeadLetter(context.Background(), br.rec, false)
			if err != nil {
				if noSpace(err) {
					return b.noRoom(i, br, err)
				}
				return err
			}
			br.d.File, br.d.Ino, br.stored, br.streamed = stored, ino, stored, false
			continue
		}
		if content := br.unwritten; content != nil {
			files = append(files, queue.StageFile{Name: ch.recs[i].rec.DeadLetter, Fill: func(w io.Writer) error {
				_, err := w.Write(content)
				return err
			}})
			which = append(which, i)
		}
	}
	if len(files) == 0 {
		return nil
	}
	stored, err := b.c.writeFiles(queue.Error, files)
	if err != nil {
		return fmt.Errorf("dead letters of %s: %w", b.cl.Name, err)
	}
	for k, i := range which {
		br := &ch.recs[i]
		br.d.File, br.d.Ino, br.stored, br.unwritten = stored[k].Name, stored[k].Ino, stored[k].Name, nil
	}
	return nil
}

// noRoom is writeDeadLetters' failure to write the dead letter of the
// chunk's record i, a record over the record limit (streamed), for want
// of room: whole is the file's failure that sets it aside in error/
// instead. The dead letter of a record over the limit is the record
// whole, and must stay whole to be fixed and replayed (a CSV quote never
// closed makes the rest of the file one record), so it is not cut; but a
// record of gigabytes (a gzip bomb) whose dead letter cannot be written
// must not fail every run that takes its file, first by name, again.
type noRoom struct {
	i     int
	whole BatchRecord
}

func (nr *noRoom) Error() string { return nr.whole.Reject.Error() }

// noRoom sets the file aside at the chunk's record i, br, whose dead
// letter could not be written: err.
func (b *batchRun) noRoom(i int, br *batchRecord, err error) *noRoom {
	var why error = err
	var errno syscall.Errno
	if errors.As(err, &errno) {
		why = errno // "no space left on device": the rest names paths
	}
	rej := *br.d.Reject
	rej.Detail += fmt.Sprintf("; its dead letter could not be written (%v): the file is set aside whole, "+
		"and spool replay resumes it at that record once error/ has room", why)
	b.c.log.Warn("batch file set aside: a record's dead letter does not fit", "file", b.cl.Name, "record", br.rec.Origin, "err", err)
	return &noRoom{i: i, whole: BatchRecord{Whole: true, Reject: &rej}}
}

// noSpace reports whether err says the filesystem, or the user's quota,
// has no room for what was written, or the file is larger than the
// filesystem allows.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG)
}

// add turns rec into a delivery of a chunk; when it is a dead letter,
// it takes the copy of it an earlier run wrote, or leaves its content to
// write before the chunk's commit (writeDeadLetters).
func (b *batchRun) add(ctx context.Context, rec BatchRecord) (batchRecord, error) {
	c := b.c
	d := &Delivery{
		Claim: b.p.Batch + "#" + strconv.FormatInt(rec.Index, 10), File: b.cl.Name + "#" + rec.Origin,
		Ino: b.cl.Ino, Consumer: b.s.ID(), Claimed: b.claimed,
	}
	rej := rec.Reject
	if rej == nil {
		d.Hash, d.Size = ContentHash(rec.JSON), int64(len(rec.JSON))
		d.Message, rej = c.parse(rec.JSON)
		if rej != nil {
			// The contract's detail says what, the record's origin where.
			r := *rej
			r.Detail = originText(rec.Origin) + ": " + r.Detail
			rej = &r
		}
	}
	d.At = time.Now().UTC()
	br := batchRecord{d: d, rec: rec}
	if b.resumed && c.cfg.Caller != nil {
		o, settled, err := b.settledBefore(ctx, d, rej)
		if err != nil || settled {
			br.absorbed, br.absorbedAs = settled, o
			return br, err
		}
	}
	if rej != nil {
		d.Message, d.Reject = nil, rej
		// Always looked for first: any earlier run of this file may
		// have written it and died before its commit, whether or not it
		// committed anything, and whatever its batch size (TestBatchCrashLong
		// once found a second copy when the resumed run's first commit
		// ended the look before the record that an earlier run, with a
		// larger batch, had written). The look is an fstatat or two.
		stored, ino, body, err := b.lookDeadLetter(ctx, rec)
		if err != nil {
			return br, err
		}
		if stored == "" {
			br.unwritten, br.streamed = body.held, body.over
		} else {
			d.File, d.Ino, br.stored = stored, ino, stored
		}
	}
	return br, nil
}

// originText spells a BatchRecord.Origin for a detail: "line 17",
// "element 5".
func originText(o string) string {
	if len(o) > 1 && o[0] == 'E' {
		return "element " + o[1:]
	}
	return "line " + o[1:]
}

// writeDeadLetter writes rec's one-record dead letter into error/, or,
// with check, finds the one an earlier run wrote before it died: a file
// of the same bytes under its name or a collision name of it, whose inode
// no dead letter is recorded with.
func (b *batchRun) writeDeadLetter(ctx context.Context, rec BatchRecord, check bool) (string, uint64, error) {
	if check {
		stored, ino, _, err := b.lookDeadLetter(ctx, rec)
		if err != nil || stored != "" {
			return stored, ino, err
		}
	}
	stored, ino, err := b.c.dir.WriteStage(queue.Error, rec.DeadLetter, rec.WriteDeadLetter)
	if err != nil {
		return "", 0, fmt.Errorf("dead letter of %s %s: %w", b.cl.Name, rec.Origin, err)
	}
	return stored, ino, nil
}

// lookDeadLetter finds the dead letter of rec that an earlier run wrote
// before it died: a file of the same bytes under its name or a collision
// name of it, whose inode no dead letter is recorded with. Without one,
// stored is "" and body is what to write.
func (b *batchRun) lookDeadLetter(ctx context.Context, rec BatchRecord) (stored string, ino uint64, body *deadLetterBody, err error) {
	c := b.c
	body = &deadLetterBody{sum: sha256.New(), held: []byte{}} // non-nil: to write, even empty
	if err := rec.WriteDeadLetter(body); err != nil {
		return "", 0, nil, fmt.Errorf("dead letter of %s %s: %w", b.cl.Name, rec.Origin, err)
	}
	var sum [sha256.Size]byte
	body.sum.Sum(sum[:0])
	copies, err := c.dir.Copies(queue.Error, rec.DeadLetter, body.size, sum)
	if err != nil {
		return "", 0, nil, fmt.Errorf("dead letter of %s %s: %w", b.cl.Name, rec.Origin, err)
	}
	for _, cp := range copies {
		known, err := c.ledger.DeadLetterIno(ctx, cp.Ino)
		if err != nil {
			return "", 0, nil, fmt.Errorf("ledger: %w", err)
		}
		if !known {
			return cp.Name, cp.Ino, nil, nil // ours, from before the crash
		}
	}
	return "", 0, body, nil
}

// deadLetterBody is a dead letter as it is written through it: its
// size and SHA-256, and its bytes up to maxHeldDeadLetter. A larger one
// (over is set, held dropped) is not held but written again from its
// batch file: a record over the limit is not held by the reader either,
// and a CSV file whose quote is never closed is one record of the rest
// of the file (a 90 MB file held 363 MB before).
type deadLetterBody struct {
	sum  hash.Hash
	size int64
	held []byte
	over bool
}

// maxHeldDeadLetter is the largest dead letter a chunk holds until it
// writes it: the default record limit.
const maxHeldDeadLetter = 1 << 20

func (d *deadLetterBody) Write(p []byte) (int, error) {
	d.sum.Write(p)
	d.size += int64(len(p))
	if !d.over && len(d.held)+len(p) > maxHeldDeadLetter {
		d.over, d.held = true, nil
	}
	if !d.over {
		d.held = append(d.held, p...)
	}
	return len(p), nil
}

// commit records the pending chunk with the progress after it, then
// writes the dead letters its handler decided and reports each record.
func (b *batchRun) commit(ctx context.Context) error {
	if len(b.pending) == 0 {
		return nil
	}
	c := b.c
	batch := make([]*Delivery, len(b.pending))
	for i, br := range b.pending {
		batch[i] = br.d
	}
	w := Work{Handler: c.cfg.Handler, Decide: batchDecide(c.cfg.Retry.Decide)}
	if w.Handler != nil {
		w.Handler = observed{h: w.Handler, kind: kindOf(w.Handler), o: c.cfg.Observer}
	}
	start := time.Now()
	res, err := c.ledger.RecordBatch(ctx, batch, w, b.p)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	if len(res) != len(batch) {
		return fmt.Errorf("ledger: %d results for a batch of %d", len(res), len(batch))
	}
	c.cfg.Observer.Committed(len(batch), time.Since(start))
	b.recorded = true
	for i, br := range b.pending {
		if err := b.report(ctx, br, res[i]); err != nil {
			return err
		}
	}
	b.pending = b.pending[:0]
	return nil
}

// recordEmpty writes the progress row of a file that ends with no row
// yet, a file of no records (empty, or a header alone): the row is the
// ledger's record of it, which spool status lists and spool fsck knows
// the file in done/ by.
func (b *batchRun) recordEmpty(ctx context.Context) error {
	if b.recorded {
		return nil
	}
	if _, err := b.c.ledger.RecordBatch(ctx, nil, Work{}, b.p); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	b.recorded = true
	return nil
}

// report finishes a record whose outcome r is committed: a dead letter
// its handler (or its call) decided gets its file, written after the
// commit that decided it, and then named in its record; a crash before
// that leaves the record under its origin, which the resumed run finds
// (writeUnwritten). Then the record is counted, logged and reported.
func (b *batchRun) report(ctx context.Context, br batchRecord, r Result) error {
	c := b.c
	stored := br.stored
	if r.Outcome == OutcomeDeadLetter && stored == "" {
		var err error
		if stored, err = b.writeRecorded(ctx, br.d.Claim, br.rec, false); err != nil {
			return err
		}
	}
	if stored == "" {
		stored = b.cl.Name
	}
	if r.Outcome == OutcomeDeadLetter {
		c.log.Info("dead letter", "file", br.d.File, "stored", stored, "reason", r.Reject.Reason, "detail", r.Reject.Error())
	}
	c.batchMu.Lock()
	c.batchStats.add(r.Outcome)
	c.batchMu.Unlock()
	switch r.Outcome {
	case OutcomeProcessed, OutcomeDuplicate:
		b.settled++
	case OutcomeDeadLetter:
		if b.dead++; b.dead == 1 && r.Reject != nil {
			b.firstDead = r.Reject.Error()
		}
	}
	c.cfg.Observer.Delivered(br.d, r)
	if r.Outcome == OutcomeRetry {
		c.log.Info("retry scheduled", append([]any{"file", br.d.File, "msg_id", br.d.Message.MsgID,
			"attempt", r.Attempts, "at", r.RetryAt, "err", r.Err}, br.d.Message.Headers.LogArgs()...)...)
		return nil // its file goes nowhere: the record is called again (callRun.again)
	}
	if c.cfg.OnDelivery != nil {
		c.cfg.OnDelivery(br.d, r, stored)
	}
	return nil
}

// writeRecorded writes the dead letter of rec, recorded under claim by a
// commit, and names it in the record. With check, a copy written before a
// crash is taken instead of writing another (writeDeadLetter).
func (b *batchRun) writeRecorded(ctx context.Context, claim string, rec BatchRecord, check bool) (string, error) {
	stored, ino, err := b.writeDeadLetter(ctx, rec, check)
	if err != nil {
		return "", err
	}
	if err := b.c.ledger.SetDeadLetterFile(ctx, claim, stored, ino); err != nil {
		return "", fmt.Errorf("ledger: %w", err)
	}
	return stored, nil
}

// writeUnwritten writes, on a resume, the dead letters a killed run
// recorded (its handler decided them) and did not write: they are before
// the position, so the file is read again from its start up to the last
// of them. It returns how many it wrote.
func (b *batchRun) writeUnwritten(ctx context.Context) (int, error) {
	c := b.c
	claims, err := c.ledger.UnwrittenDeadLetters(ctx, b.p.Batch, b.cl.Name+"#")
	if err != nil || len(claims) == 0 {
		if err != nil {
			err = fmt.Errorf("ledger: %w", err)
		}
		return 0, err
	}
	want := make(map[int64]string, len(claims))
	for _, claim := range claims {
		_, idx, _ := strings.Cut(claim[len(b.p.Batch):], "#")
		i, err := strconv.ParseInt(idx, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("dead letters of %s: claim %s: %w", b.cl.Name, claim, err)
		}
		want[i] = claim
	}
	f, err := b.s.Open(b.cl)
	if err != nil {
		return 0, err
	}
	defer f.Close() // read-only: a close error loses nothing
	rd, err := c.cfg.Batch.OpenBatch(f, b.cl.Name, "")
	if err != nil {
		return 0, fmt.Errorf("consume batch file %s: %w", b.cl.Name, err)
	}
	n := 0
	for len(want) > 0 {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return n, fmt.Errorf("dead letters of %s: %d records recorded are not in the file", b.cl.Name, len(want))
		}
		if err != nil {
			return n, fmt.Errorf("consume batch file %s: %w", b.cl.Name, err)
		}
		claim, ok := want[rec.Index]
		if !ok {
			continue
		}
		if _, err := b.writeRecorded(ctx, claim, rec, true); err != nil {
			return n, err
		}
		delete(want, rec.Index)
		n++
	}
	return n, nil
}

// batchDecide is the retry policy for a batch file's records: a record
// cannot wait in processing/ for its retry while the file goes on, so a
// failure the policy would retry is a dead letter at once (reason
// retries-exhausted), its one-record file for an operator to replay.
func batchDecide(decide func(Failure) Verdict) func(Failure) Verdict {
	return func(f Failure) Verdict {
		v := decide(f)
		if v.Outcome == OutcomeRetry {
			return Verdict{Outcome: OutcomeDeadLetter, Reason: ReasonRetriesExhausted}
		}
		return v
	}
}

// whole dead-letters the file itself: it cannot be read at all.
func (b *batchRun) whole(ctx context.Context, rec BatchRecord) error {
	c := b.c
	d := &Delivery{Claim: b.cl.ID, File: b.cl.Name, Ino: b.cl.Ino, Consumer: b.s.ID(), Size: b.cl.Size,
		Claimed: b.claimed, At: time.Now().UTC(), Reject: rec.Reject}
	res, err := c.ledger.RecordBatch(ctx, []*Delivery{d}, Work{}, b.p)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	if len(res) != 1 {
		return fmt.Errorf("ledger: %d results for a batch of 1", len(res))
	}
	c.batchMu.Lock()
	c.batchStats.add(res[0].Outcome)
	c.batchMu.Unlock()
	if err := b.finish(queue.Error); err != nil {
		return err
	}
	c.log.Info("dead letter", "file", d.File, "stored", d.File, "reason", rec.Reject.Reason, "detail", rec.Reject.Error())
	c.cfg.Observer.Delivered(d, res[0])
	if c.cfg.OnDelivery != nil {
		c.cfg.OnDelivery(d, res[0], d.File)
	}
	return nil
}

// giveBack puts the batch file back into inbox/, unfinished, as
// recovery puts an unrecorded claim back, announced by its done-file
// under the name it gets there (queue.Session.ReturnAnnounced: a kill
// half-way leaves a mark that recovery finishes): its progress is
// committed, and the next claim of it resumes there.
func (b *batchRun) giveBack() error {
	c := b.c
	c.moves.Lock()
	defer c.moves.Unlock()
	stored, err := b.s.ReturnAnnounced(b.cl, b.done, c.announcer())
	if err != nil {
		return err
	}
	c.log.Info("batch file given back", "file", b.cl.Name, "stored", stored, "position", b.p.Position)
	if c.cfg.Relaxed {
		return nil
	}
	return c.dir.Sync(queue.Inbox)
}

// claimDoneFile claims the done-file of the batch file cl into the
// session's directory beside it: while the file is consumed, inbox/ then
// holds no announcement of its name, which would make a file of the same
// name that a producer writes meanwhile look finished before its own
// done-file comes. nil when cl needs none, or its done-file is not in
// inbox/.
func (c *Consumer) claimDoneFile(s *queue.Session, cl *queue.Claim) (*queue.Claim, error) {
	name := c.cfg.Batch.DoneFile(cl.Name)
	if name == "" {
		return nil, nil
	}
	done, err := s.Claim(name)
	if errors.Is(err, queue.ErrGone) || errors.Is(err, queue.ErrBusy) {
		return nil, nil
	}
	return done, err
}

// finish moves the batch file to stage to, once every record of it is
// committed (I3, I4), and its done-file before it, durably: a kill
// between the two moves then leaves the data file claimed alone, which
// recovery puts back in inbox/ with a new done-file (queue.Announcer).
func (b *batchRun) finish(to queue.Stage) error {
	c := b.c
	if to == queue.Done {
		b.warnChanged()
		b.warnRead()
	}
	c.moves.Lock()
	defer c.moves.Unlock()
	name := b.cl.Name
	if b.done != nil {
		// The done-file goes under the name announcing the one the file
		// will get there (orders~2.csv.done for orders~2.csv), so that a
		// replay or discard of the file finds it; a name whose done-file
		// is taken is not free (a done-file a kill left between the two
		// moves of an earlier finish).
		name = b.s.FreeName(b.cl, to, c.announcer())
		doneName := cmp.Or(c.cfg.Batch.DoneFile(name), b.done.Name)
		if _, err := b.s.FinishAs(b.done, to, doneName); err != nil {
			return err
		}
		if !c.cfg.Relaxed {
			if err := c.dir.Sync(to); err != nil {
				return err
			}
			if err := b.s.Sync(); err != nil {
				return err
			}
		}
	}
	if _, err := b.s.FinishAs(b.cl, to, name); err != nil {
		return err
	}
	if c.cfg.Relaxed {
		return nil
	}
	return c.dir.Sync(to)
}

// warnRead logs, of a file read to its end, what its reader notes (an
// XML file without the queue's records), and a run whose every record
// was a dead letter, several of them: another system's file sent to the
// queue, or a contract that does not fit the files, which the dead
// letters' own lines, one a record, do not say at a glance.
func (b *batchRun) warnRead() {
	if n, ok := b.rd.(batchNoter); ok {
		if note := n.Note(); note != "" { // read to the end: the reader is done
			b.c.log.Warn("batch file read", "file", b.cl.Name, "note", note)
		}
	}
	if b.settled == 0 && b.dead > 1 {
		b.c.log.Warn("batch file read: every record is a dead letter; is the file this queue's, and the contract the files'?",
			"file", b.cl.Name, "dead_letters", b.dead, "first", b.firstDead)
	}
}

// warnChanged logs a file that changed after its claim, read to its end
// and about to go to done/: its producer writes it in place, and what it
// writes from now on lands in done/, unread. spool fsck reports such a
// file afterwards (done-changed), however late the producer wrote.
func (b *batchRun) warnChanged() {
	if changed, err := b.s.Changed(b.cl); err == nil && changed {
		b.c.log.Warn("batch file changed while it was read: its producer writes it in place, and what it writes after this read is not consumed; give it a done_file or --min-age",
			"file", b.cl.Name)
	}
}

// announcer names the done-file that announces a batch file in inbox/,
// for the files recovery or giveBack put back there (queue.Announcer):
// nil for a queue whose files need none.
func (c *Consumer) announcer() queue.Announcer {
	b := c.cfg.Batch
	if b == nil {
		return nil
	}
	return func(name string) string {
		if !b.Batched(name) {
			return ""
		}
		return b.DoneFile(name)
	}
}

// takeBatchStats returns what batch files' records became since the last
// call, for a pass to add to its Stats.
func (c *Consumer) takeBatchStats() Stats {
	c.batchMu.Lock()
	defer c.batchMu.Unlock()
	st := c.batchStats
	c.batchStats = Stats{}
	return st
}
