package fsck

import (
	"context"
	"fmt"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
)

// This file holds the step for held/, the stage of the messages an
// operator holds aside (spool hold, docs/DESIGN.md, "Pause and hold"): a
// file there is held, not lost (I1: it is in exactly one place), whether
// or not the ledger recorded it; a record whose file is gone from held/
// is a file removed by hand.

// held counts the files in held/ (informational), those without a record
// (informational: a hold killed between its move and its record, or a
// file put there by hand; held all the same), and the records whose file
// is gone (a problem; Repair forgets them, the audit keeps their story).
// A hold moves its file before it records it, and a release forgets the
// record before it moves the file, so a record without its file is not
// an operator's hold or release under way: a record found without its
// file is looked for again after the records are read again, and only
// one still recorded and still gone is reported.
func (c *checker) held(ctx context.Context) ([]*finding, error) {
	all := c.newFinding(Held, true)
	unrecorded := c.newFinding(HeldUnrecorded, true)
	missing := c.newFinding(HeldMissing, false)
	recs, err := c.l.Holding().HeldFiles(ctx)
	if err != nil {
		return nil, err
	}
	type key struct {
		name string
		ino  uint64
	}
	present := map[key]bool{}
	byName := map[string]bool{}
	err = c.d.List(queue.Held, func(e queue.Entry) error {
		present[key{e.Name, e.Ino}] = true
		byName[e.Name] = true
		return ctx.Err()
	})
	if err != nil {
		return nil, err
	}
	recorded := map[string]bool{}
	var gone []ledger.HeldFile
	for _, r := range recs {
		recorded[r.File] = true
		if present[key{r.File, r.Ino}] || (r.Ino == 0 && byName[r.File]) {
			continue
		}
		gone = append(gone, r)
	}
	for name := range present {
		all.add(string(queue.Held) + "/" + name.name)
		if !recorded[name.name] {
			unrecorded.add(string(queue.Held) + "/" + name.name)
		}
	}
	if len(gone) > 0 {
		// A second look: released meanwhile, or gone for good.
		again, err := c.l.Holding().HeldFiles(ctx)
		if err != nil {
			return nil, err
		}
		still := map[int64]bool{}
		for _, r := range again {
			still[r.ID] = true
		}
		var ids []int64
		for _, r := range gone {
			if !still[r.ID] {
				continue
			}
			if ino, ok, err := c.d.Inode(queue.Held, r.File); err != nil {
				return nil, err
			} else if ok && (r.Ino == 0 || ino == r.Ino) {
				continue
			}
			missing.add(fmt.Sprintf("%s/%s (was %s, held by %s)", queue.Held, r.File, r.Origin, r.By))
			ids = append(ids, r.ID)
		}
		if c.repair && len(ids) > 0 {
			if err := c.l.Holding().ForgetHeldFiles(ctx, ids); err != nil {
				return nil, err
			}
			c.o.Log(fmt.Sprintf("repaired %d held records whose file is gone from held/: forgotten (the audit keeps who held them)", len(ids)))
		}
	}
	all.Text = fmt.Sprintf("%d messages are held aside in held/ (spool hold; not lost: spool release puts them back)", all.Count)
	unrecorded.Text = fmt.Sprintf("%d files in held/ have no hold record (a hold killed between its move and its record, or a file put there by hand): held all the same, spool release releases them", unrecorded.Count)
	missing.Text = fmt.Sprintf("%d hold records name a file gone from held/: removed by hand, neither released nor consumed", missing.Count)
	return []*finding{all, unrecorded, missing}, nil
}
