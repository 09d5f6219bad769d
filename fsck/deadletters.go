package fsck

import (
	"context"
	"fmt"
	"slices"

	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/report"
)

// This file holds the dead-letter index against error/: the other
// direction of errorStage, a record whose file is gone.

// deadLetters reports the current dead-letter records whose file is not in
// error/ (report.InError, the check the console's listing makes): those a
// replay or discard of a file of their name explains, after it was edited
// to a new inode (replaced, informational), and the others, removed by
// hand (missing). Repair retires both from the dead-letter index; the
// records stay, as history.
//
// A record is only called gone once the queue has been looked at again:
// a consumer moves a dead letter into error/ just after its record
// commits, and a replay or discard moves one out before its record does.
// So the records not found are checked again in an order that leaves
// neither race a way through: the claims in processing/ first, error/ next,
// then the replays and discards not yet finished (each is committed before
// its first move), and last whether the record is still current.
func (c *checker) deadLetters(ctx context.Context) (missing, replaced *finding, err error) {
	missing, replaced = c.newFinding(DeadLetterMissing, false), c.newFinding(DeadLetterReplaced, true)
	var gone []ledger.DeadLetterFile
	check := report.NewInError(c.d, c.l)
	err = c.l.DeadLetters().Current(ctx, func(files []ledger.DeadLetterFile) error {
		present, err := check.Check(ctx, files)
		if err != nil {
			return err
		}
		for i, f := range files {
			if !present[i] {
				gone = append(gone, f)
			}
		}
		return nil
	})
	if err == nil && len(gone) > 0 {
		gone, err = c.stillGone(ctx, gone)
	}
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		missing.Text = fmt.Sprintf("%d dead-letter records have no file in error/, neither replayed nor discarded (removed by hand)", missing.Count)
		replaced.Text = fmt.Sprintf("%d dead-letter records of files edited in error/ (a new inode) and then replayed or discarded", replaced.Count)
	}()
	if len(gone) == 0 {
		return missing, replaced, nil
	}
	exits, err := c.l.DeadLetters().ErrorExits(ctx)
	if err != nil {
		return nil, nil, err
	}
	retire := map[ledger.DeadLetterExit][]int64{}
	for _, f := range gone {
		how := explained(f, exits)
		example := f.File + " (" + f.Reason + ")"
		if how == "" {
			missing.add(example)
			how = ledger.ExitRemoved
		} else {
			replaced.add(example)
		}
		retire[how] = append(retire[how], f.ID)
	}
	if !c.repair {
		return missing, replaced, nil
	}
	for _, how := range []ledger.DeadLetterExit{ledger.ExitRemoved, ledger.ExitReplayed, ledger.ExitDiscarded} {
		if err := c.l.DeadLetters().Retire(ctx, retire[how], how, c.o.Consumer, c.now); err != nil {
			return nil, nil, err
		}
	}
	for _, f := range gone {
		c.o.Log(fmt.Sprintf("repaired dead letter %s (%s, recorded %s): no file in error/; no longer listed, its record kept",
			f.File, f.Reason, f.At.UTC().Format("2006-01-02T15:04:05Z")))
	}
	return missing, replaced, nil
}

// stillGone checks the records in gone again, as deadLetters says, and
// returns those whose file is still nowhere.
func (c *checker) stillGone(ctx context.Context, gone []ledger.DeadLetterFile) ([]ledger.DeadLetterFile, error) {
	claims, err := c.d.ClaimFiles()
	if err != nil {
		return nil, err
	}
	inFlight := map[uint64]bool{}
	for _, cl := range claims {
		inFlight[cl.Ino] = true
	}
	gone = slices.DeleteFunc(gone, func(f ledger.DeadLetterFile) bool { return f.Ino != 0 && inFlight[f.Ino] })
	present, err := report.NewInError(c.d, c.l).Check(ctx, gone)
	if err != nil {
		return nil, err
	}
	var out []ledger.DeadLetterFile
	for i, f := range gone {
		if !present[i] {
			out = append(out, f)
		}
	}
	// A replay or discard under way: its files are under staging names or
	// on their way to inbox/, and its records not written yet.
	replays, err := c.l.Replays().Unfinished(ctx)
	if err != nil {
		return nil, err
	}
	discards, err := c.l.Discards().Unfinished(ctx)
	if err != nil {
		return nil, err
	}
	var moving []ledger.ErrorExit
	for _, in := range replays {
		for _, it := range in.Items {
			moving = append(moving, ledger.ErrorExit{File: it.File, Ino: it.Ino})
		}
	}
	for _, b := range discards {
		for _, it := range b.Items {
			moving = append(moving, ledger.ErrorExit{File: it.File, Ino: it.Ino})
		}
	}
	out = slices.DeleteFunc(out, func(f ledger.DeadLetterFile) bool {
		return slices.ContainsFunc(moving, func(m ledger.ErrorExit) bool { return f.Ino != 0 && m.Ino == f.Ino || sameName(m.File, f.File) })
	})
	if len(out) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(out))
	for i, f := range out {
		ids[i] = f.ID
	}
	current, err := c.l.DeadLetters().StillCurrent(ctx, ids)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(out, func(f ledger.DeadLetterFile) bool { return !current[f.ID] }), nil
}

// explained returns how the file of f, gone from error/, left it on
// purpose: the latest replay or discard, after f was recorded, of a file of
// its name; "" when none.
func explained(f ledger.DeadLetterFile, exits []ledger.ErrorExit) ledger.DeadLetterExit {
	var (
		how    ledger.DeadLetterExit
		latest ledger.ErrorExit
	)
	for _, e := range exits {
		if !e.At.Before(f.At) && sameName(e.File, f.File) && (how == "" || e.At.After(latest.At)) {
			how, latest = e.How, e
		}
	}
	return how
}

// sameName reports whether stored, a name in error/, may be the file of a
// record made under recorded: the same name, or with a collision suffix
// (as fsck matches names: stageKeys).
func sameName(stored, recorded string) bool {
	want := recordedKey(0, recorded).name
	return slices.ContainsFunc(stageKeys(nil, 0, stored), func(k fileKey) bool { return k.name == want })
}
