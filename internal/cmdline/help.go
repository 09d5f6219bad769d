package cmdline

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/spoolq/spool/internal/spelling"
)

// WriteHelp prints the whole help of c (PROGRAM help NAME) on w: its
// synopsis, description and flags fs; for a command with Groups, the
// description's first paragraph, the flags, then the rest of it.
func (p *Program) WriteHelp(w io.Writer, c *Command, fs *flag.FlagSet) {
	help := strings.TrimSpace(c.Help)
	if c.Groups == nil {
		fmt.Fprintf(w, "Usage: %s %s %s\n\n%s\n", p.Name, c.Name, c.Args, help)
		p.writeFlags(w, c, fs)
		return
	}
	intro, rest, _ := strings.Cut(help, "\n\n")
	fmt.Fprintf(w, "Usage: %s %s %s\n\n%s\n", p.Name, c.Name, c.Args, intro)
	p.writeFlags(w, c, fs)
	if rest != "" {
		fmt.Fprintf(w, "\n%s\n", rest)
	}
}

// WriteShortHelp prints what -h asks for on w: the synopsis, the summary
// and the flags fs, pointing at the whole help.
func (p *Program) WriteShortHelp(w io.Writer, c *Command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s %s %s\n\n%s.\n", p.Name, c.Name, strings.TrimSpace(Synopsis(c.Args)+" [FLAGS]"), c.Summary)
	p.writeFlags(w, c, fs)
	fmt.Fprintf(w, "\nRun '%s help %s' for the whole description.\n", p.Name, c.Name)
}

func (p *Program) writeFlags(w io.Writer, c *Command, fs *flag.FlagSet) {
	has := false
	fs.VisitAll(func(*flag.Flag) { has = true })
	if !has {
		return
	}
	if c.Groups != nil {
		writeGroupedFlags(w, fs, c.Groups)
	} else {
		fmt.Fprint(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if c.Env {
		fmt.Fprint(w, p.EnvHelp)
		var skipped []string
		fs.VisitAll(func(f *flag.Flag) {
			if _, ok := p.FlagVar(f.Name); !ok {
				skipped = append(skipped, Dashed(f.Name))
			}
		})
		if len(skipped) > 0 {
			fmt.Fprintf(w, p.ReservedHelp, strings.Join(skipped, " and "))
		}
	}
}

// writeGroupedFlags prints the flags of fs by group, one flag a line with
// its description beside it, wrapped: 41 flags in package flag's two
// lines each are four screens, in name order.
func writeGroupedFlags(w io.Writer, fs *flag.FlagSet, groups []FlagGroup) {
	const indent, width = 26, 79
	var all []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { all = append(all, f) })
	for i, flags := range GroupFlags(all, groups) {
		if len(flags) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", groups[i].Title)
		for _, f := range flags {
			arg, usage := flag.UnquoteUsage(f)
			left := "  " + Dashed(f.Name)
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

// ApplyEnv sets each flag of fs the command line left unset from its
// environment variable (EnvName), when that is set: a systemd
// EnvironmentFile holds a daemon's settings. A value the flag refuses is
// an error naming the variable. An empty variable is a value like any
// other (SPOOL_DB= is refused as --db "" is). The Reserved names are not
// read. It returns the flags it set.
func (p *Program) ApplyEnv(fs *flag.FlagSet) (set []string, err error) {
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || explicit[f.Name] {
			return
		}
		name, ok := p.FlagVar(f.Name)
		if !ok {
			return // reserved for the programs this one runs
		}
		v, ok := os.LookupEnv(name)
		if !ok {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("%s=%q (for %s): %v", p.EnvName(f.Name), v, Dashed(f.Name), serr)
			return
		}
		set = append(set, f.Name)
	})
	return set, err
}

// KnownVars returns every variable of EnvPrefix the program reads or
// sets, each with what it is: the settings of the commands with Env
// ("for --FLAG"), then the Reserved ones (ReservedWhat). It is the one
// table of them: ApplyEnv reads its settings, UnknownVars the rest.
func (p *Program) KnownVars() map[string]string {
	known := map[string]string{}
	for _, c := range p.Commands {
		if !c.Env {
			continue
		}
		for _, f := range c.FlagList() {
			if v, ok := p.FlagVar(f.Name); ok {
				if _, seen := known[v]; !seen {
					known[v] = "for " + Dashed(f.Name)
				}
			}
		}
	}
	for _, v := range p.Reserved {
		known[v] = p.ReservedWhat
	}
	return known
}

// UnknownVars returns one line for each variable of environ (NAME=VALUE
// entries, as os.Environ gives them) named EnvPrefix in any case that the
// program neither reads nor sets, nor begins with one of OtherPrefixes,
// with the known name it is closest to, in name order: a typo that would
// be ignored without a word (SPOOL_MINAGE for SPOOL_MIN_AGE).
func (p *Program) UnknownVars(environ []string) []string {
	known := p.KnownVars()
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(strings.ToUpper(name), p.EnvPrefix) {
			continue
		}
		if _, ok := known[name]; ok || slices.ContainsFunc(p.OtherPrefixes, func(o string) bool { return strings.HasPrefix(name, o) }) {
			continue
		}
		line := fmt.Sprintf("%s is not a setting of %s: it is ignored", name, p.Name)
		if near := nearestVar(known, name); near != "" {
			line += fmt.Sprintf(" (did you mean %s, %s?)", near, known[near])
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}

// nearestVar returns the known name that name is most likely a typo of:
// the same but for case, or within three edits (an underscore missing or
// doubled, a letter swapped or wrong) of the part after the prefix; ""
// for none.
func nearestVar(known map[string]string, name string) string {
	best, bestD := "", 4
	for _, k := range slices.Sorted(maps.Keys(known)) {
		if strings.EqualFold(k, name) {
			return k
		}
		if d := spelling.Distance(strings.ToUpper(name), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// Wrap breaks s between words into lines of at most width bytes (a
// longer word stands alone on its line).
func Wrap(s string, width int) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Fields(s) {
		switch {
		case i == 0:
		case line+1+len(word) > width:
			b.WriteByte('\n')
			line = 0
		default:
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += len(word)
	}
	return b.String()
}
