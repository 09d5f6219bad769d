package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/queueopen"
)

var checkCommand = &command{
	name:    "check",
	args:    "DIR [consume's FLAGS]",
	groups:  consumeGroups,
	summary: "check a queue's setup, and print the configuration consume would run with",
	opts:    newOpts[checkOpts],
}

// checkOpts are spool check's: consume's flags, checked as consume
// would check them.
type checkOpts struct {
	dirOpts
	cfl *consumeFlags
}

func (o *checkOpts) flags(fs *flag.FlagSet) { o.cfl = addConsumeFlags(fs) }

func (o *checkOpts) validate(e *env, pos []string) error {
	if err := e.positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	o.dir = pos[0]
	return nil
}

func (o *checkOpts) run(ctx context.Context, e *env) (err error) {
	dir, cfl, flags := o.dir, o.cfl, e.fs
	var problems []string
	problem := func(err error) { problems = append(problems, err.Error()) }
	// The environment as consume reads it (check is not a command with
	// env, so that a bad value is a problem found, not a usage error).
	set, envErr := program.ApplyEnv(flags)
	e.fromEnv = set
	if envErr != nil {
		problem(envErr)
	}
	problems = append(problems, program.UnknownVars(os.Environ())...)
	if _, err := cfl.check(e, flags); err != nil {
		problem(err)
	}
	defer cfl.dedup.close()

	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
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
	fmt.Fprintln(e.stdout)
	if err := queueopen.WriteSettings(e.stdout, effectiveConfig(flags, e.fromEnv, contract, file, run)); err != nil {
		return err
	}
	for _, p := range problems {
		e.warn("%s", p)
	}
	if len(problems) > 0 {
		return errCheckFailed
	}
	return nil
}
