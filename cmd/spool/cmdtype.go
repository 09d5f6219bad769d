package main

import "flag"

// Each command is a type (cmdline.Options): a struct of its options,
// bound to its flag set by Flags, checked with the positional arguments
// by Validate (a usage error, exit 2, before anything is opened), and
// carried out by Run, which ends in the library call that does the work.

// dirOpts are the options of a command of one queue: DIR, the one
// positional argument, and --db.
type dirOpts struct {
	dir string
	db  *string
}

func (o *dirOpts) Flags(fs *flag.FlagSet) { o.db = addDBFlag(fs) }

func (o *dirOpts) Validate(e *env, pos []string) error {
	if err := e.Positionals(pos, 1, 1, "DIR"); err != nil {
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
	o.dirOpts.Flags(fs)
}
