package cmdline

import (
	"flag"
	"slices"
	"strings"
)

// Command is one subcommand: what runs it (Options), and what help,
// completion and manual pages say of it.
type Command struct {
	// Name is what selects the command: spool NAME.
	Name string
	// Args is the synopsis after the command's name.
	Args string
	// Summary is one line for the program's list of commands.
	Summary string
	// Help is the longer description for `PROGRAM help NAME`.
	Help string
	// Env says every flag may also come from an environment variable
	// (Program.EnvName), unless Program.Reserved names it.
	Env bool
	// Groups, when set, lists the flags by what they are for, in that
	// order, and the help shows the first paragraph of Help before them
	// and the rest after.
	Groups []FlagGroup
	// Options returns a fresh value of the command's options (New[O]):
	// its Flags are the one definition that parsing, the help,
	// completion and manual pages read.
	Options func() Options
}

// FlagGroup is a titled group of a command's flags in its help, in the
// order given; the group with no Names takes the flags no other lists.
type FlagGroup struct {
	Title string
	Names []string
}

// Program is a command line of subcommands: its name, its commands in
// the order its help lists them, and how its flags map to environment
// variables.
type Program struct {
	// Name is the program's name, as typed: spool.
	Name string
	// Commands are the subcommands, in the order of the help.
	Commands []*Command
	// EnvPrefix begins every variable that sets a flag: SPOOL_.
	EnvPrefix string
	// Reserved are variables of EnvName's form that set no flag: the
	// program sets them for other programs it runs, which may run it in
	// turn, and must not take them for its own flags.
	Reserved []string
	// ReservedWhat says what the Reserved variables are, for a list of
	// known variables ("which spool sets for ...").
	ReservedWhat string
	// EnvHelp is the help's note, after the flags of a command with Env,
	// on how a variable sets a flag.
	EnvHelp string
	// ReservedHelp is the help's note on the flags no variable sets, its
	// %s their names ("Not %s: ...").
	ReservedHelp string
	// OtherPrefixes begin variables of EnvPrefix that are no setting and
	// no typo either (the tests' switches).
	OtherPrefixes []string
	// Description is the program's one line for its manual page
	// (NAME \- Description); ExitStatus is that page's EXIT STATUS.
	Description, ExitStatus string
	// ManSynopsis is the program's SYNOPSIS after its name, in roff.
	ManSynopsis string
	// Headline opens the list of commands, Usage follows "Usage: " under
	// it, and UsageHint ends the line after the list.
	Headline, Usage, UsageHint string
	// ExitCode maps a command's error (nil for success) to the exit
	// status Run returns: how errors map is the program's.
	ExitCode func(error) int
	// OneLine keeps a message on one line, escaping what a terminal
	// would act on (nil: spaces for line breaks).
	OneLine func(string) string
}

// FlagList returns the flags of c, as its Flags binds them, without
// running it.
func (c *Command) FlagList() []*flag.Flag {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	c.Options().Flags(fs)
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	return flags
}

// EnvName is the environment variable that sets the flag name of a
// command with Env: SPOOL_MAX_SIZE for max-size.
func (p *Program) EnvName(name string) string {
	return p.EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// FlagVar returns the variable that sets the flag name of a command with
// Env, and false for a flag no variable sets: one whose variable is
// Reserved.
func (p *Program) FlagVar(name string) (string, bool) {
	v := p.EnvName(name)
	return v, !slices.Contains(p.Reserved, v)
}

// Synopsis drops the optional flags from a synopsis, keeping the
// positional arguments: "DIR [-o FILE] [--sql]" -> "DIR". A bracket that
// begins with "[-", "[contract", "[consume's" or is "[FLAGS]" is flags.
func Synopsis(args string) string {
	var keep []string
	depth := 0
	skipping := false
	for _, tok := range strings.Fields(args) {
		if depth == 0 {
			skipping = strings.HasPrefix(tok, "[-") || strings.HasPrefix(tok, "[contract") ||
				tok == "[FLAGS]" || strings.HasPrefix(tok, "[consume's")
		}
		depth += strings.Count(tok, "[") - strings.Count(tok, "]")
		if !skipping {
			keep = append(keep, tok)
		}
	}
	return strings.Join(keep, " ")
}

// GroupFlags returns flags by group, each group's in its order; the
// rest, in the order given, in the group without names.
func GroupFlags(flags []*flag.Flag, groups []FlagGroup) [][]*flag.Flag {
	out := make([][]*flag.Flag, len(groups))
	byName := map[string]*flag.Flag{}
	for _, f := range flags {
		byName[f.Name] = f
	}
	listed := map[string]bool{}
	for i, g := range groups {
		for _, name := range g.Names {
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
			if g.Names == nil {
				out[i] = append(out[i], f)
				break
			}
		}
	}
	return out
}
