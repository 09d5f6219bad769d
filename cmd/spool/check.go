package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
)

var checkCommand = &cmdline.Command{
	Name:    "check",
	Args:    "DIR [consume's FLAGS]",
	Groups:  consumeGroups,
	Summary: "check a queue's setup, and print the configuration consume would run with",
	Options: cmdline.New[checkOpts],
}

// checkOpts are spool check's: consume's flags, checked as consume
// would check them.
type checkOpts struct {
	dirOpts
	cfl *consumeFlags
}

func (o *checkOpts) Flags(fs *flag.FlagSet) { o.cfl = addConsumeFlags(fs) }

func (o *checkOpts) Validate(e *env, pos []string) error {
	if err := e.Positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	o.dir = pos[0]
	return nil
}

func (o *checkOpts) Run(ctx context.Context, e *env) (err error) {
	dir, cfl, flags := o.dir, o.cfl, e.FS
	var problems []string
	problem := func(err error) { problems = append(problems, err.Error()) }
	// The environment as consume reads it (check is not a command with
	// env, so that a bad value is a problem found, not a usage error).
	set, envErr := program.ApplyEnv(flags)
	e.FromEnv = set
	if envErr != nil {
		problem(envErr)
	}
	problems = append(problems, program.UnknownVars(os.Environ())...)
	if _, err := cfl.check(e, flags); err != nil {
		problem(err)
	}
	defer cfl.dedup.close()

	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	var contract *spool.Contract
	var file, run *queueopen.Config
	if c, f, err := cfl.contract.contractFrom(dir); err != nil {
		problem(err)
	} else {
		contract, file, run = &c, f, f
		// The format flags as consume applies them; their own mistakes
		// are cfl.check's problems.
		if o := cfl.format.override(); o.Check() == nil {
			if run, err = o.Apply(f); err != nil {
				problem(err)
				run = f
			}
		}
	}
	// The ledger's refusals worded as every command words them.
	for _, f := range queueopen.CheckQueue(ctx, dir, *cfl.db, *cfl.watch && *cfl.poll == 0,
		func(err error) { problem(ledgerFailure(err, dir, *cfl.db)) }) {
		fmt.Fprintf(tw, "%s\t%s\n", f.Name, f.Text)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.Stdout)
	if err := queueopen.WriteSettings(e.Stdout, effectiveConfig(flags, e.FromEnv, contract, file, run)); err != nil {
		return err
	}
	for _, p := range problems {
		e.Warn("%s", p)
	}
	if len(problems) > 0 {
		return errCheckFailed
	}
	return nil
}
