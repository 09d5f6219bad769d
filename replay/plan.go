package replay

import (
	"context"
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
			return fmt.Errorf("%w: a dead letter is named by its name in error/, as spool errors lists it, not by a path", err)
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

// MessageKey is the step's message key: the one read from the file with the
// contract, else the one the ledger recorded.
func (s Step) MessageKey() string {
	if s.Key != "" {
		return s.Key
	}
	return s.MsgID
}

// Plan is a selection resolved against error/ and the ledger: the dead
// letters it selected, in the order given (name order for a reason or
// all), and which of them a replay moves. It is plain data: it can be
// shown as a dry run, or made the file set of a task (package task).
type Plan struct {
	Selection Selection
	Steps     []Step
	// Pending are the files of error/ a reason or all selected that are
	// pending dead letters (report.ErrorRow.PendingOf), left out: the run
	// that resumes their batch file records them, and would write them
	// again were they moved.
	Pending []report.PendingError
}

// Resolve resolves s against the dead letters in error/ and the ledger
// into a plan, and changes nothing. Every name must be a message in
// error/, and no pending dead letter (a *report.PendingError, which is
// queue.ErrNotInError), or nothing is selected (an error wrapping
// queue.ErrNotInError); a name given twice is selected once. A reason or all that matches
// nothing is an empty plan, not an error. Each file's key is read with
// contract c (an operator may have fixed the file in error/), else taken
// from the ledger's record; a step whose key processed already holds is
// skipped unless force. keep, when not nil, keeps only the selected dead
// letters for which it is true, in the plan's order: the filters of a
// task (package task) on the time of dead-lettering, the detail, the
// msg_id or the ordering key. A name given but not kept is not an error:
// it is left out. keep sees each candidate before the plan skips it.
//
// A caller that moves the plan's files holds the queue's replay lock
// (queue.Dir.LockReplays), taken before it finished interrupted replays
// (ResumeLocked), from before Resolve until its move is begun, so that no
// other replay moves the files between the plan and the move.
func Resolve(ctx context.Context, d *queue.Dir, l *ledger.DB, c spool.Contract, s Selection, force bool, keep func(report.ReplayCandidate) bool) (Plan, error) {
	if err := s.Check(); err != nil {
		return Plan{}, err
	}
	rows, err := report.Errors(ctx, d, l)
	if err != nil {
		return Plan{}, fmt.Errorf("replay plan: %w", err)
	}
	selected, pending, err := pick(rows, s)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Selection: s, Pending: pending}
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

// pick selects the rows of s: the named files, every one with the
// reason, or all; the pending dead letters a reason or all selected are
// left out and returned apart, and a named one is refused.
func pick(rows []report.ErrorRow, s Selection) (out []report.ErrorRow, pending []report.PendingError, err error) {
	if len(s.Names) > 0 {
		byName := make(map[string]report.ErrorRow, len(rows))
		for _, r := range rows {
			byName[r.File] = r
		}
		seen := map[string]bool{}
		for _, n := range s.Names {
			r, ok := byName[n]
			if !ok {
				return nil, nil, fmt.Errorf("%s: %w", n, queue.ErrNotInError)
			}
			if r.PendingOf != "" {
				return nil, nil, &report.PendingError{File: r.File, Of: r.PendingOf}
			}
			if !seen[n] {
				seen[n] = true
				out = append(out, r)
			}
		}
		return out, nil, nil
	}
	for _, r := range rows {
		if !s.All && r.Reason != s.Reason {
			continue
		}
		if r.PendingOf != "" {
			pending = append(pending, report.PendingError{File: r.File, Of: r.PendingOf})
		} else {
			out = append(out, r)
		}
	}
	return out, pending, nil
}
