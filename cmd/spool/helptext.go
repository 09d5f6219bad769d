package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// writeHelp prints the whole help of the command (spool help COMMAND):
// its synopsis, description and flags; for a command with flag groups,
// the description's first paragraph, the flags, then the rest of it.
func (e *env) writeHelp(fs *flag.FlagSet) {
	help := strings.TrimSpace(e.cmd.help)
	if e.cmd.groups == nil {
		fmt.Fprintf(e.stdout, "Usage: spool %s %s\n\n%s\n", e.cmd.name, e.cmd.args, help)
		e.writeFlags(fs)
		return
	}
	intro, rest, _ := strings.Cut(help, "\n\n")
	fmt.Fprintf(e.stdout, "Usage: spool %s %s\n\n%s\n", e.cmd.name, e.cmd.args, intro)
	e.writeFlags(fs)
	if rest != "" {
		fmt.Fprintf(e.stdout, "\n%s\n", rest)
	}
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
	if e.cmd.groups != nil {
		writeGroupedFlags(e.stdout, fs, e.cmd.groups)
	} else {
		fmt.Fprint(e.stdout, "\nFlags:\n")
		fs.SetOutput(e.stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if e.cmd.env {
		fmt.Fprint(e.stdout, "\nEvery flag may also be set in the environment as SPOOL_ and its name in\ncapitals, - as _ (SPOOL_MAX_SIZE=64KiB for --max-size); a flag given wins.\n")
		var skipped []string
		fs.VisitAll(func(f *flag.Flag) {
			if _, ok := flagVar(f.Name); !ok {
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
		name, ok := flagVar(f.Name)
		if !ok {
			return // a message's value, set for a handler's program
		}
		v, ok := os.LookupEnv(name)
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

// commandFlags returns the flags of c, as its options bind them,
// without running it.
func commandFlags(c *command) []*flag.Flag {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.opts().flags(fs)
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	return flags
}

// flagGroup is a titled group of a command's flags in its help, in the
// order given; the group with no names takes the flags no other lists.
type flagGroup struct {
	title string
	names []string
}

// groupFlags returns flags by group, each group's in its order; the
// rest, in the order given, in the group without names.
func groupFlags(flags []*flag.Flag, groups []flagGroup) [][]*flag.Flag {
	out := make([][]*flag.Flag, len(groups))
	byName := map[string]*flag.Flag{}
	for _, f := range flags {
		byName[f.Name] = f
	}
	listed := map[string]bool{}
	for i, g := range groups {
		for _, name := range g.names {
			if f := byName[name]; f != nil {
				out[i] = append(out[i], f)
				listed[name] = true
			}
		}
	}
	for _, f := range flags {
		if listed[f.Name] {
			continue
		}
		for i, g := range groups {
			if g.names == nil {
				out[i] = append(out[i], f)
				break
			}
		}
	}
	return out
}

// writeGroupedFlags prints the flags of fs by group, one flag a line with
// its description beside it, wrapped: 41 flags in package flag's two
// lines each are four screens, in name order.
func writeGroupedFlags(w io.Writer, fs *flag.FlagSet, groups []flagGroup) {
	const indent, width = 26, 79
	var all []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { all = append(all, f) })
	for i, flags := range groupFlags(all, groups) {
		if len(flags) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", groups[i].title)
		for _, f := range flags {
			arg, usage := flag.UnquoteUsage(f)
			left := "  " + dashed(f.Name)
			if arg != "" {
				left += " " + arg
			}
			words := strings.Fields(usage)
			if d := f.DefValue; !strings.Contains(usage, "(default") && d != "" && d != "0" && d != "false" && d != "0s" {
				words = append(words, "(default "+d+")") // one word: never cut
			}
			line := left
			if len(left) > indent-2 {
				fmt.Fprintln(w, left)
				line = ""
			}
			for len(words) > 0 {
				line += strings.Repeat(" ", indent-len(line))
				n := 0
				for n < len(words) && (n == 0 || len(line)+1+len(words[n]) <= width) {
					if n > 0 {
						line += " "
					}
					line += words[n]
					n++
				}
				fmt.Fprintln(w, line)
				words, line = words[n:], ""
			}
		}
	}
}
