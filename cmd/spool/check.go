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
	help: `
Checks, without changing anything, what 'spool consume DIR' given the same
flags and environment would run with, and prints it: the queue, its
ledger, its filesystem, and every setting with where it came from (flag,
its SPOOL_ variable, spool.conf, or default). Each problem is one line on
stderr, and the exit status is then 1.

It checks DIR/spool.conf, read strictly as consume reads it (a misspelt
key is a problem, not a default), and the flags; the environment: a SPOOL_
variable that is no setting (SPOOL_MINAGE for SPOOL_MIN_AGE), which
consume would ignore with a warning, is a problem here, naming the
closest real one; the ledger: it answers, belongs to this queue (its
queue.id) and has the schema of this spool; the stages: one filesystem,
each takes a new file (run the check as the user consume runs as: sudo -u
spool spool check DIR), and at least 64 MiB and 1024 inodes free there;
and with --watch, that this user's processes leave an inotify instance
and a watch free (fs.inotify.max_user_instances and max_user_watches,
without which consume polls). A queue without a ledger yet is not a
problem: the first consume creates it.

Prints: the lines queue, ledger, stages and inotify, then the settings by
group, each as FLAG VALUE FROM ("(none)" for an empty value; a password in
a URL masked).`,
	opts: newOpts[checkOpts],
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
