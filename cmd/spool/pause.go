package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/spoolq/spool/hold"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
)

var pauseCommand = &cmdline.Command{
	Name:    "pause",
	Args:    "DIR [--note TEXT] [--db PATH]",
	Summary: "stop every consumer of the queue claiming, on every host, until spool resume DIR",
	Options: cmdline.New[pauseOpts],
}

// pauseOpts are spool pause's.
type pauseOpts struct {
	dirOpts
	note *string
}

func (o *pauseOpts) Flags(fs *flag.FlagSet) {
	o.note = fs.String("note", "", "why the queue is paused (`TEXT`), shown with the pause")
	o.dirOpts.Flags(fs)
}

func (o *pauseOpts) Run(ctx context.Context, e *env) error {
	return pauseQueue(ctx, e, o.dir, *o.db, *o.note, true)
}

// runResumeQueue is spool resume DIR, without a task ID.
func runResumeQueue(ctx context.Context, e *env, dir, db, note string) error {
	return pauseQueue(ctx, e, dir, db, note, false)
}

// pauseQueue pauses (or resumes) the queue at dir as the OS user.
func pauseQueue(ctx context.Context, e *env, dir, db, note string, paused bool) (err error) {
	s, done, err := holdService(ctx, dir, db, nil, ledgerOpts{use: writeLedger})
	if err != nil {
		return err
	}
	defer done(&err)
	who := currentOperator().Identity()
	var c hold.Change
	if paused {
		c, err = s.Pause(ctx, who, note)
	} else {
		c, err = s.Resume(ctx, who, note)
	}
	if err != nil {
		return err
	}
	b := c.Before
	switch {
	case paused && c.Changed:
		fmt.Fprintf(e.Stdout, "queue %s paused: its consumers stop claiming and calling within a second; those under way finish. spool resume %s lets them go on\n", dir, queueopen.ShellWord(dir))
	case paused:
		fmt.Fprintf(e.Stdout, "queue %s is paused already, %s; nothing changed\n", dir, hold.PausedBy(b))
	case c.Changed:
		fmt.Fprintf(e.Stdout, "queue %s resumed (it was paused %s): its consumers go on within a second\n", dir, hold.PausedBy(b))
	default:
		fmt.Fprintf(e.Stdout, "queue %s is not paused; nothing changed (spool resume DIR ID runs a task)\n", dir)
	}
	return nil
}

// holdService opens the queue at dir and its ledger as lo says, with
// the queue's contract (cf's flags over its spool.conf; nil: spool.conf
// alone), as its hold.Service (queueopen.OpenHolds), for the pause and
// hold commands; done closes them, keeping the first error in *err.
func holdService(ctx context.Context, dir, db string, cf *contractFlags, lo ledgerOpts) (*hold.Service, func(*error), error) {
	o := lo.options(db)
	if cf != nil {
		o.Override = cf.override()
	}
	s, closeAll, err := queueopen.OpenHolds(ctx, dir, o)
	if err != nil {
		return nil, nil, ledgerFailure(err, dir, db)
	}
	return s, func(err *error) {
		if cerr := closeAll(); cerr != nil && *err == nil {
			*err = cerr
		}
	}, nil
}
