package replay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/queue"
	"github.com/spoolq/spool/report"
)

// Selection is which dead letters an operator asks to replay: exactly one
// of Names (files in error/), Reason (every dead letter recorded with that
// reason, or report.ReasonUnknown for files without a record) or All.
type Selection struct {
	Names  []string
	Reason string
	All    bool
}

// ErrNoSelection is returned by Selection.Check when nothing is selected.
var ErrNoSelection = errors.New("replay: select names, a reason or all")

// ErrManySelections is returned by Selection.Check when more than one way
// of selecting is given.
var ErrManySelections = errors.New("replay: select names, a reason or all, not several")

// Check returns ErrNoSelection or ErrManySelections unless exactly one way
// of selecting is given, and refuses a name that is not a plain file name
// (queue.CheckName), before anything is opened or read.
func (s Selection) Check() error {
	modes := 0
	for _, on := range []bool{len(s.Names) > 0, s.Reason != "", s.All} {
		if on {
			modes++
		}
	}
	switch {
	case modes == 0:
		return ErrNoSelection
	case modes > 1:
		return ErrManySelections
	}
	for _, n := range s.Names {
		if err := queue.CheckName(n); err != nil {
			return err
		}
	}
	return nil
}

// Step is one selected dead letter and what the plan does with it.
type Step struct {
	// ReplayCandidate is the dead letter, its key and whether the
	// ledger already processed that key.
	report.ReplayCandidate
	// Skip: the ledger already processed the message's key and the plan
	// was not forced, so the file stays in error/. A forced replay of it
	// is absorbed by the ledger as a duplicate (or flagged as a conflict,
	// if the bodies differ).
	Skip bool
}

// Plan is a selection resolved against error/ and the ledger: the dead
// letters it selected, in the order given (name order for a reason or
// all), and which of them a replay moves. It is plain data: it can be
// shown as a dry run and then executed by Execute, under the same replay
// lock.
type Plan struct {
	Selection Selection
	Steps     []Step
}

// Files returns the dead letters the plan moves (the steps not skipped),
// as Run takes them.
func (p Plan) Files() []File {
	var out []File
	for _, s := range p.Steps {
		if !s.Skip {
			out = append(out, File{Name: s.File, Ino: s.Ino})
		}
	}
	return out
}

// Resolve resolves s against the dead letters in error/ and the ledger
// into a plan, and changes nothing. Every name must be a message in
// error/, or nothing is selected (an error wrapping queue.ErrNotInError);
// a name given twice is selected once. A reason or all that matches
// nothing is an empty plan, not an error. Each file's key is read with
// contract c (an operator may have fixed the file in error/), else taken
// from the ledger's record; a step whose key processed already holds is
// skipped unless force.
//
// The caller holds the queue's replay lock (queue.Dir.LockReplays), taken
// before it finished interrupted replays (ResumeLocked), and keeps it
// until Execute returns, so that no other replay moves the files between
// the plan and its execution.
func Resolve(ctx context.Context, d *queue.Dir, l *ledger.DB, c spool.Contract, s Selection, force bool) (Plan, error) {
	return ResolveWhere(ctx, d, l, c, s, force, nil)
}

// ResolveWhere is Resolve keeping only the selected dead letters for which
// keep (when not nil) is true, in the plan's order: the filters of a task
// (package task) on the time of dead-lettering, the detail, the msg_id or
// the ordering key. A name given but not kept is not an error: it is left
// out. keep sees each candidate before the plan skips it.
func ResolveWhere(ctx context.Context, d *queue.Dir, l *ledger.DB, c spool.Contract, s Selection, force bool, keep func(report.ReplayCandidate) bool) (Plan, error) {
	if err := s.Check(); err != nil {
		return Plan{}, err
	}
	rows, err := report.Errors(ctx, d, l)
	if err != nil {
		return Plan{}, fmt.Errorf("replay plan: %w", err)
	}
	selected, err := pick(rows, s)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Selection: s}
	if len(selected) == 0 {
		return p, nil
	}
	candidates, err := report.ReplayPlan(ctx, d, l, c, selected)
	if err != nil {
		return Plan{}, err
	}
	p.Steps = make([]Step, 0, len(candidates))
	for _, cand := range candidates {
		if keep == nil || keep(cand) {
			p.Steps = append(p.Steps, Step{ReplayCandidate: cand, Skip: cand.Processed && !force})
		}
	}
	return p, nil
}

// Execute replays the files of p (Run on p.Files()): it commits the
// intent, then moves them, and returns one record per file moved. The
// caller still holds the replay lock it took before Resolve. A plan that
// moves nothing records nothing.
func Execute(ctx context.Context, d *queue.Dir, l *ledger.DB, p Plan, by, note string) ([]ledger.Replay, error) {
	files := p.Files()
	if len(files) == 0 {
		return nil, nil
	}
	return Run(ctx, d, l, files, by, note)
}

// pick selects the rows of s: the named files, every one with the
// reason, or all.
func pick(rows []report.ErrorRow, s Selection) ([]report.ErrorRow, error) {
	var out []report.ErrorRow
	switch {
	case len(s.Names) > 0:
		byName := make(map[string]report.ErrorRow, len(rows))
		for _, r := range rows {
			byName[r.File] = r
		}
		seen := map[string]bool{}
		for _, n := range s.Names {
			r, ok := byName[n]
			if !ok {
				return nil, fmt.Errorf("%s: %w", n, queue.ErrNotInError)
			}
			if !seen[n] {
				seen[n] = true
				out = append(out, r)
			}
		}
	case s.All:
		out = rows
	default:
		for _, r := range rows {
			if r.Reason == s.Reason {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// Lock takes the queue's replay lock and finishes the replays a killed
// run left unfinished (ResumeLocked), so that a selection resolved next
// sees the queue as they leave it. It returns the function that releases
// the lock, and the replays it finished, also when finishing one failed;
// on error the lock is already released.
func Lock(ctx context.Context, d *queue.Dir, l *ledger.DB) (unlock func() error, finished []Finished, err error) {
	unlock, err = d.LockReplays(ctx)
	if err != nil {
		return nil, nil, err
	}
	finished, err = ResumeLocked(ctx, d, l)
	if err != nil {
		if uerr := unlock(); uerr != nil {
			err = errors.Join(err, fmt.Errorf("resume replays: unlock: %w", uerr))
		}
		return nil, finished, err
	}
	return unlock, finished, nil
}

// Digest identifies the file set a plan resolved to: the hex SHA-256 of
// each step's name, inode and whether it is skipped, in plan order. Two
// resolutions of one selection have the same digest exactly when they
// would move and skip the same files, so a plan shown to one person (a
// dry run, a request awaiting approval) can be checked against the plan
// resolved again when it is run: a file replayed, discarded, fixed or
// added since changes the digest.
func (p Plan) Digest() string {
	h := sha256.New()
	for _, s := range p.Steps {
		fmt.Fprintf(h, "%s\x00%d\x00%t\n", s.File, s.Ino, s.Skip)
	}
	return hex.EncodeToString(h.Sum(nil))
}
