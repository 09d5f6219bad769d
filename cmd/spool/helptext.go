package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spoolq/spool/handler"
)

// writeHelp prints the whole help of the command (spool help COMMAND):
// its synopsis, description and flags.
func (e *env) writeHelp(fs *flag.FlagSet) {
	fmt.Fprintf(e.stdout, "Usage: spool %s %s\n\n%s\n", e.cmd.name, e.cmd.args, strings.TrimSpace(e.cmd.help))
	e.writeFlags(fs)
}

// writeShortHelp prints what -h asks for: the synopsis, the summary and
// the flags, pointing at the whole help.
func (e *env) writeShortHelp(fs *flag.FlagSet) {
	fmt.Fprintf(e.stdout, "Usage: spool %s %s\n\n%s.\n", e.cmd.name, strings.TrimSpace(positionalSynopsis(e.cmd.args)+" [FLAGS]"), e.cmd.summary)
	e.writeFlags(fs)
	fmt.Fprintf(e.stdout, "\nRun 'spool help %s' for the whole description.\n", e.cmd.name)
}

func (e *env) writeFlags(fs *flag.FlagSet) {
	has := false
	fs.VisitAll(func(*flag.Flag) { has = true })
	if !has {
		return
	}
	fmt.Fprint(e.stdout, "\nFlags:\n")
	fs.SetOutput(e.stdout)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	if e.cmd.env {
		fmt.Fprint(e.stdout, "\nEvery flag may also be set in the environment as SPOOL_ and its name in\ncapitals, - as _ (SPOOL_MAX_SIZE=64KiB for --max-size); a flag given wins.\n")
		var skipped []string
		fs.VisitAll(func(f *flag.Flag) {
			if slices.Contains(handler.Vars, envName(f.Name)) {
				skipped = append(skipped, dashed(f.Name))
			}
		})
		if len(skipped) > 0 {
			fmt.Fprintf(e.stdout, "Not %s: their variables are the message's values that --exec hands its\nprogram; set them in spool.conf.\n", strings.Join(skipped, " and "))
		}
	}
}

// envName is the environment variable that sets the flag name of a
// command with env: SPOOL_MAX_SIZE for max-size.
func envName(name string) string {
	return "SPOOL_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// applyEnv sets each flag of fs the command line left unset from its
// environment variable (envName), when that is set: a systemd
// EnvironmentFile holds a daemon's settings. A value the flag refuses is
// an error naming the variable. An empty variable is a value like any
// other (SPOOL_DB= is refused as --db "" is). The names the handlers set
// for the programs they run (handler.Vars: SPOOL_SEQ, SPOOL_AMOUNT) are
// not read: a program run by --exec that runs spool itself would take the
// message's seq for --seq. It returns the flags it set.
func applyEnv(fs *flag.FlagSet) (set []string, err error) {
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || explicit[f.Name] {
			return
		}
		if slices.Contains(handler.Vars, envName(f.Name)) {
			return // a message's value, set for a handler's program
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("%s=%q (for %s): %v", envName(f.Name), v, dashed(f.Name), serr)
			return
		}
		set = append(set, f.Name)
	})
	return set, err
}

// commandFlags returns the flags of c, read from its flag set without
// running it.
func commandFlags(c *command) []*flag.Flag {
	var flags []*flag.Flag
	e := &env{cmd: c, stdout: io.Discard, stderr: io.Discard, capture: func(fs *flag.FlagSet) {
		fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	}}
	_ = c.run(context.Background(), e, nil) // returns errHelp at parse
	return flags
}
