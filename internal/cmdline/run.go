package cmdline

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/spoolq/spool/internal/spelling"
)

// Options is a command as a type: a struct of its options, which Flags
// binds to the command's flag set, Validate checks with the positional
// arguments (a usage error, before anything is opened), and Run carries
// out, ending in the library call that does the work. Help, completion
// and manual pages read the flags Flags binds, so a flag is defined once.
type Options interface {
	Flags(fs *flag.FlagSet)
	Validate(e *Env, pos []string) error
	Run(ctx context.Context, e *Env) error
}

// New is a command's options constructor, New[O]: a fresh O for each run,
// and for each reading of its flags.
func New[O any, P interface {
	*O
	Options
}]() Options {
	return P(new(O))
}

// ErrHelp is returned after a command printed its help on request: exit
// status 0, nothing more printed.
var ErrHelp = errors.New("help requested")

// ErrReported is returned by a command whose output already shows what
// went wrong (a check's findings): Run prints nothing more for it.
var ErrReported = errors.New("check found a problem")

// UsageError is a command line that cannot be right: its one line, and
// the help that says how it is right.
type UsageError struct {
	Msg string
	// Help, when set, is the command that shows the right usage
	// ("spool help replay").
	Help string
}

func (e *UsageError) Error() string {
	if e.Help == "" {
		return e.Msg
	}
	return e.Msg + ". Try: " + e.Help
}

// Usagef is a usage error of no command in particular.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// Env is what a command may touch besides the filesystem: its streams,
// its command and its flags once parsed.
type Env struct {
	Program *Program
	Cmd     *Command
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	// Log, when set (a daemon's structured log), receives the warnings
	// and the final error as records instead of lines.
	Log *slog.Logger
	// long makes -h print the whole help (PROGRAM help COMMAND), not the
	// synopsis and flags.
	long bool
	// FromEnv lists the flags set from the environment (ApplyEnv), so
	// that an error about one names its variable.
	FromEnv []string
	// FS is the command's flag set once parsed, for Given.
	FS *flag.FlagSet
}

// Warn prints a one-line warning to stderr in the format of errors
// ("PROGRAM: COMMAND: WARNING"), or logs it.
func (e *Env) Warn(format string, args ...any) {
	msg := e.Program.oneLine(fmt.Sprintf(format, args...))
	if e.Log != nil {
		e.Log.Warn(msg, "command", e.Cmd.Name)
		return
	}
	fmt.Fprintf(e.Stderr, "%s: %s: %s\n", e.Program.Name, e.Cmd.Name, msg)
}

// Given reports whether the command line set the flag name of the
// command's flag set (see the function Given).
func (e *Env) Given(name string) bool { return e.FS != nil && Given(e.FS, name) }

// Usage returns a usage error: its one line (naming the variable that
// set the flag it is about, when one did), then where the help is.
func (e *Env) Usage(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	for _, name := range e.FromEnv {
		if strings.HasPrefix(msg, Dashed(name)+" ") || strings.HasPrefix(msg, Dashed(name)+":") {
			msg += " (set by " + e.Program.EnvName(name) + ")"
			break
		}
	}
	return &UsageError{Msg: msg, Help: e.Program.Name + " help " + e.Cmd.Name}
}

// Positionals checks the number of positional arguments: at least min, at
// most max (max < 0: no limit), naming the first missing one, and that
// none is empty.
func (e *Env) Positionals(pos []string, min, max int, names ...string) error {
	if len(pos) < min {
		return e.Usage("missing %s", names[len(pos)])
	}
	if max >= 0 && len(pos) > max {
		return e.Usage("unexpected argument %q", pos[max])
	}
	for i, p := range pos {
		if p == "" {
			name := "argument"
			if i < len(names) {
				name = names[i]
			}
			return e.Usage("%s is empty", name)
		}
	}
	return nil
}

// run runs the command: a fresh options value, its flags parsed from
// args (anywhere among the positionals, then from the environment for a
// command with Env), validated, then run. -h prints the command's help
// on stdout and returns ErrHelp.
func (e *Env) run(ctx context.Context, args []string) error {
	o := e.Cmd.Options()
	fs := flag.NewFlagSet(e.Cmd.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and help are Parse's
	fs.Usage = func() {}
	o.Flags(fs)
	e.FS = fs
	pos, err := Parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		if e.long {
			e.Program.WriteHelp(e.Stdout, e.Cmd, fs)
		} else {
			e.Program.WriteShortHelp(e.Stdout, e.Cmd, fs)
		}
		return ErrHelp
	}
	if err != nil {
		return e.Usage("%v", err)
	}
	if e.Cmd.Env {
		if e.FromEnv, err = e.Program.ApplyEnv(fs); err != nil {
			return e.Usage("%v", err)
		}
	}
	if err := o.Validate(e, pos); err != nil {
		return err
	}
	return o.Run(ctx, e)
}

// Run is the whole command line, args without the program's name: the
// command they name, run, its error printed as one line on stderr, and
// the exit status ExitCode maps it to. It never exits, so a test calls
// it as main does.
func (p *Program) Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		p.WriteUsage(stderr)
		return p.ExitCode(&UsageError{Msg: "missing command"})
	}
	name := args[0]
	long := false
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) == 1 {
			p.WriteUsage(stdout)
			return p.ExitCode(nil)
		}
		// The command prints its own help, with its flags.
		name, args, long = args[1], []string{name, "-h"}, true
		stdin = nil
	case "-version", "--version":
		name = "version"
	}
	c := p.Lookup(name)
	if c == nil {
		prefix := ""
		if long {
			prefix = "help: "
		}
		fmt.Fprintf(stderr, "%s: %s%s: %s\n", p.Name, prefix, p.oneLine(name), p.unknownCommand(name))
		return p.ExitCode(&UsageError{Msg: "unknown command"})
	}
	e := &Env{Program: p, Cmd: c, Stdin: stdin, Stdout: stdout, Stderr: stderr, long: long}
	return p.finish(e, e.run(ctx, args[1:]))
}

// finish prints err as one line on stderr (or logs it), unless the
// command's output already said it all, and returns the exit status.
func (p *Program) finish(e *Env, err error) int {
	code := p.ExitCode(err)
	if err == nil || errors.Is(err, ErrHelp) || errors.Is(err, ErrReported) {
		return code
	}
	if e.Log != nil {
		e.Log.Error(p.oneLine(err.Error()), "command", e.Cmd.Name, "exit", code)
		return code
	}
	fmt.Fprintf(e.Stderr, "%s: %s: %s\n", p.Name, e.Cmd.Name, p.oneLine(err.Error()))
	return code
}

// oneLine keeps a message on one line (Program.OneLine).
func (p *Program) oneLine(s string) string {
	if p.OneLine == nil {
		return strings.Join(strings.Fields(s), " ")
	}
	return p.OneLine(s)
}

// Lookup returns the command called name, or nil.
func (p *Program) Lookup(name string) *Command {
	for _, c := range p.Commands {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// unknownCommand is the line that refuses name, with the command it is
// likely a typo of: the same but for case, or within two edits (one for
// a name of three letters or fewer).
func (p *Program) unknownCommand(name string) string {
	best, bestD := "", 3
	if len(name) <= 3 {
		bestD = 2
	}
	for _, c := range p.Commands {
		if strings.EqualFold(c.Name, name) {
			best, bestD = c.Name, -1
			break
		}
		if d := spelling.Distance(c.Name, name); d < bestD {
			best, bestD = c.Name, d
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown command (did you mean %s?)", best)
	}
	return fmt.Sprintf("unknown command (run '%s help' for the list)", p.Name)
}

// WriteUsage writes the program's list of commands and its exit statuses.
func (p *Program) WriteUsage(w io.Writer) {
	fmt.Fprintf(w, "%s\n\nUsage: %s\n\nCommands:\n", p.Headline, p.Usage)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range p.Commands {
		fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(c.Name+" "+Synopsis(c.Args)), c.Summary)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRun '%s help COMMAND' for a command's flags.%s\n%s\n", p.Name, p.UsageHint,
		Wrap("Exit status: "+p.ExitStatus, 76))
}
