package main

import (
	"context"
	"flag"

	"github.com/spoolq/spool/internal/cmdline"
)

// options is a command as a type: a struct of its options, which flags
// binds to the command's flag set, validate checks with the positional
// arguments (a usage error, exit 2, before anything is opened), and run
// carries out, ending in the library call that does the work. Help,
// completion and man pages read the flags flags binds (command.spec), so
// a flag is defined once.
type options interface {
	flags(fs *flag.FlagSet)
	validate(e *env, pos []string) error
	run(ctx context.Context, e *env) error
}

// newOpts is a command's options constructor, newOpts[O]: a fresh O for
// each run, and for each reading of its flags.
func newOpts[O any, P interface {
	*O
	options
}]() options {
	return P(new(O))
}

// run runs the command: a fresh options value, its flags parsed from
// args (anywhere among the positionals), validated, then run.
func (c *command) run(ctx context.Context, e *env, args []string) error {
	o := c.opts()
	fs := e.flagSet()
	o.flags(fs)
	pos, err := e.parse(fs, args)
	if err != nil {
		return err
	}
	if err := o.validate(e, pos); err != nil {
		return err
	}
	return o.run(ctx, e)
}

// given reports whether the command line set the flag name of the
// command's flag set (see the function given).
func (e *env) given(name string) bool { return e.fs != nil && cmdline.Given(e.fs, name) }

// dirOpts are the options of a command of one queue: DIR, the one
// positional argument, and --db.
type dirOpts struct {
	dir string
	db  *string
}

func (o *dirOpts) flags(fs *flag.FlagSet) { o.db = addDBFlag(fs) }

func (o *dirOpts) validate(e *env, pos []string) error {
	if err := e.positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	o.dir = pos[0]
	return nil
}

// reportOpts are a report's: a queue's dirOpts, -o FILE and --json.
type reportOpts struct {
	dirOpts
	out    *string
	asJSON *bool
}

// bind registers -o, --json (its usage json) and --db.
func (o *reportOpts) bind(fs *flag.FlagSet, json string) {
	o.out = addOutputFlag(fs)
	o.asJSON = fs.Bool("json", false, json)
	o.dirOpts.flags(fs)
}
