package fsck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/report"
)

// This file holds the comparison of the stages with the ledger's records.

// RepairBatch is how many files of done/ unknown by key are resolved at a
// time: read, looked up by msg_id, and recorded in one transaction.
const RepairBatch = 256

// done compares done/ with the ledger: every file must be known by its key,
// or its message's msg_id must have a processed row, or it got there
// before the prune horizon (kept: spool prune removed its row on purpose,
// and such a file is never read nor recorded again).
func (c *checker) done(ctx context.Context) (unrecorded, invalid, kept, changed *finding, err error) {
	unrecorded, invalid = c.newFinding(DoneUnrecorded, false), c.newFinding(DoneInvalid, false)
	kept, changed = c.newFinding(KeptAfterPrune, true), c.newFinding(DoneChanged, false)
	known, batches, err := c.knownFiles(ctx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	horizon, err := c.l.Fsck().PruneHorizon(ctx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var pending []queue.Entry
	flush := func() error {
		err := c.resolveDone(ctx, pending, unrecorded, invalid)
		pending = pending[:0]
		return err
	}
	err = c.d.List(queue.Done, func(e queue.Entry) error {
		n := len(c.staged)
		c.staged = stageKeys(c.staged, e.Ino, e.Name)
		if grewAfterClaim(e, c.staged[n:], batches) {
			changed.add("done/" + e.Name)
		}
		for _, k := range c.staged[n:] {
			if _, ok := slices.BinarySearchFunc(known, k, compareKeys); ok {
				c.byInode++
				return nil
			}
		}
		if !horizon.IsZero() && e.ChangeTime < horizon.UnixNano() {
			kept.add("done/" + e.Name)
			return nil
		}
		if pending = append(pending, e); len(pending) == RepairBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return nil, nil, nil, nil, err
	}
	unrecorded.Text = fmt.Sprintf("%d files in done/ have no processed or duplicate record (rows lost)", unrecorded.Count)
	invalid.Text = fmt.Sprintf("%d files in done/ have no record and are not valid messages", invalid.Count)
	kept.Text = fmt.Sprintf("%d files in done/ were kept when spool prune removed their rows (not lost: spool prune DIR --older-than DURATION --files removes them)", kept.Count)
	changed.Text = fmt.Sprintf("%d batch files in done/ changed after they were claimed: a producer wrote them in place, and what it wrote after the claim was not consumed (give such a producer a done_file or --min-age; to consume the rest, put the file back into inbox/ under a new name: the records read before are absorbed as duplicates)", changed.Count)
	return unrecorded, invalid, kept, changed, nil
}

// grewAfterClaim reports whether the file e of done/ is a batch file
// (a progress row under one of its keys) that changed after its claim,
// and not as far as its records were read: a producer wrote on in place,
// and spool read only what was there. A file read to its last byte as it
// is now (a producer that wrote on while the consumer read it all) is not
// one; the offsets of a gzipped or UTF-16 file are its decoded stream's,
// which its size never equals, so one that changed is.
func grewAfterClaim(e queue.Entry, keys []fileKey, batches map[fileKey][]batchClaim) bool {
	found := false
	for _, k := range keys {
		for _, b := range batches[k] {
			if b.id.Size == e.Size && b.id.Mtime == e.ModTime || b.offset == e.Size {
				return false
			}
			found = true
		}
	}
	return found
}

// resolveDone reads the files of done/ unknown by key: one whose msg_id
// has a processed row is recorded (see lost); any other is reported, and
// repaired.
func (c *checker) resolveDone(ctx context.Context, entries []queue.Entry, unrecorded, invalid *finding) error {
	if len(entries) == 0 {
		return nil
	}
	var (
		files []ledger.RepairedFile
		ids   []string
	)
	for _, e := range entries {
		data, err := c.d.ReadEntry(queue.Done, e, c.o.Contract.Limit())
		if errors.Is(err, os.ErrNotExist) {
			continue // pruned meanwhile
		}
		var m *spool.Message
		if err == nil {
			m, err = c.o.Contract.Parse(data)
		}
		if err != nil {
			invalid.add("done/" + e.Name)
			continue
		}
		files = append(files, ledger.RepairedFile{Name: e.Name, Ino: e.Ino, Size: e.Size, Hash: spool.ContentHash(data),
			Message: m, At: time.Unix(0, e.ChangeTime)})
		ids = append(ids, m.MsgID)
	}
	repaired, err := c.l.Fsck().RepairedAt(ctx, ids)
	if err != nil {
		return err
	}
	lost := files[:0]
	for _, f := range files {
		if c.lost(f, repaired) {
			unrecorded.add("done/" + f.Name)
			lost = append(lost, f)
		} else {
			c.moved++ // its record is under another inode
		}
	}
	if !c.repair || len(lost) == 0 {
		return nil
	}
	outcomes, err := c.l.Fsck().RepairDone(ctx, lost, c.o.Consumer, c.now)
	if err != nil {
		return err
	}
	for i, f := range lost {
		c.o.Log(fmt.Sprintf("repaired done/%s: recorded as %s (msg_id %s)", f.Name, outcomes[i], f.Message.MsgID))
	}
	return nil
}

// lost reports whether f, a file of done/ unknown by key, lost its record,
// given when a repair wrote the processed row of each msg_id that has one
// (zero: a consumer did). A file whose msg_id has no processed row did. So
// did one whose msg_id has a row that a repair wrote from another file,
// in a rebuild or in this very run: which of the files was processed, and
// which are its duplicates, is Fsck.RepairDone's to decide, whatever chunk of
// done/ each was read in. A file whose msg_id a consumer recorded is one
// whose record moved with it from an older inode (a restored queue), or a
// duplicate whose record alone was lost, which protects nothing.
func (c *checker) lost(f ledger.RepairedFile, repaired map[string]time.Time) bool {
	at, ok := repaired[f.Message.MsgID]
	if !ok {
		return true
	}
	return c.repair && !at.IsZero() && (c.rebuilding || at.Equal(c.now.Truncate(time.Microsecond)))
}

// errorStage compares error/ with the dead-letter records; the files of
// error/ without one that a batch file still to finish will record are
// pending, not unrecorded.
func (c *checker) errorStage(ctx context.Context) (f, pending *finding, err error) {
	f = c.newFinding(ErrorUnrecorded, false)
	pending = c.newFinding(PendingDeadLetters, true)
	rows, err := report.Errors(ctx, c.d, c.l)
	if err != nil {
		return nil, nil, err
	}
	var (
		lost     []ledger.RepairedFile
		recorded []uint64 // name hashes of the dead-letter records, once needed
		keys     []fileKey
	)
	for _, r := range rows {
		c.staged = stageKeys(c.staged, r.Ino, r.File)
		switch {
		case r.ByName: // edited or copied to a new inode
			c.moved++
			continue
		case r.Known:
			c.byInode++
			continue
		}
		// No record under its inode: one under its name is the file's,
		// copied with the queue to a new inode.
		if recorded == nil {
			if recorded, err = c.deadLetterNames(ctx); err != nil {
				return nil, nil, err
			}
		}
		keys = stageKeys(keys[:0], r.Ino, r.File)
		if slices.ContainsFunc(keys, func(k fileKey) bool { _, ok := slices.BinarySearch(recorded, k.name); return ok }) {
			c.moved++
			continue
		}
		if r.PendingOf != "" {
			pending.add("error/" + r.File + " (of " + r.PendingOf + ")")
			continue
		}
		f.add("error/" + r.File)
		lost = append(lost, ledger.RepairedFile{Name: r.File, Ino: r.Ino, Size: r.Size(), At: r.ModTime()})
	}
	f.Text = fmt.Sprintf("%d files in error/ have no dead-letter record", f.Count)
	pending.Text = fmt.Sprintf("%d files in error/ are dead letters of batch files not finished, written before the commit that records them: the run that resumes each file records them (not repaired)", pending.Count)
	if c.repair && len(lost) > 0 {
		if err := c.l.Fsck().RepairError(ctx, lost, c.o.Consumer, c.now); err != nil {
			return nil, nil, err
		}
		for _, r := range lost {
			c.o.Log(fmt.Sprintf("repaired error/%s: recorded as a dead letter with reason %s", r.Name, report.ReasonUnknown))
		}
	}
	return f, pending, nil
}

// strayDoneFiles reports the done-files of error/ that announce no file
// there (queue.Dir.StrayDoneFiles). A finish under way moves a done-file
// a moment before its file, so a check beside a consumer may tell of one
// that is not stray for long: the finding is informational.
func (c *checker) strayDoneFiles() (*finding, error) {
	f := c.newFinding(StrayDoneFiles, true)
	err := c.d.StrayDoneFiles(queue.Error, func(e queue.Entry) error {
		f.add("error/" + e.Name)
		return nil
	})
	f.Text = fmt.Sprintf("%d done-files in error/ announce no file there (a consumer killed between moving a batch file's done-file and the file, or a file moved by hand): remove them by hand", f.Count)
	return f, err
}

// deadLetterNames returns the name hashes of every dead-letter record,
// sorted, never nil.
func (c *checker) deadLetterNames(ctx context.Context) ([]uint64, error) {
	names := []uint64{}
	err := c.l.DeadLetters().EachFile(ctx, func(_ uint64, file string) error {
		names = append(names, recordedKey(0, file).name)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// processed reports the processed rows whose file is in no stage: not
// under its recorded inode, nor under its name with another inode (a
// copied queue).
func (c *checker) processed(ctx context.Context) (*finding, error) {
	f := c.newFinding(ProcessedWithoutFile, true)
	for _, s := range []queue.Stage{queue.Inbox} {
		if err := c.d.List(s, func(e queue.Entry) error {
			c.staged = stageKeys(c.staged, e.Ino, e.Name)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	claims, err := c.d.ClaimFiles()
	if err != nil {
		return nil, err
	}
	for _, cl := range claims {
		c.staged = stageKeys(c.staged, cl.Ino, cl.Name)
	}
	slices.SortFunc(c.staged, compareKeys)
	names := make([]uint64, 0, len(c.staged))
	for _, k := range c.staged {
		names = append(names, k.name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	err = c.l.Fsck().EachProcessed(ctx, func(p ledger.ProcessedFile) error {
		if p.Ino == 0 {
			return nil // recorded before inodes were: cannot tell
		}
		k := recordedKey(p.Ino, p.File)
		if _, ok := slices.BinarySearchFunc(c.staged, k, compareKeys); ok {
			return nil
		}
		if _, ok := slices.BinarySearch(names, k.name); ok {
			return nil // under another inode: copied
		}
		f.add(p.File + " (msg_id " + p.MsgID + ")")
		return nil
	})
	if err != nil {
		return nil, err
	}
	f.Text = fmt.Sprintf("%d processed rows have no file in any stage (pruned or removed from done/; a redelivery is still a duplicate)", f.Count)
	return f, nil
}
