// Command spool consumes a directory-based message queue into an idempotent
// ledger, and inspects, monitors and replays it. Run `spool help` for the
// commands; every command takes the queue directory first, and its flags
// may come before or after the positional arguments.
//
// The exit statuses are listed once, in docs/DESIGN.md, "Exit status", and
// mapped from errors in one place, exitCode (exit.go). Every error is one
// line on stderr: "spool: COMMAND: ERROR".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spoolq/spool/handler"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/internal/spelling"
)

func main() {
	// The clients' own lines (go-redis, the MySQL driver, ...) go through
	// spool's logger, not straight to stderr (clientlog.go).
	routeClientLogs(os.Stderr)
	code := run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	clientLogs.Flush()
	os.Exit(code)
}

// command is one subcommand of spool.
type command struct {
	name string
	// args is the synopsis after the command's name.
	args string
	// summary is one line for `spool help`.
	summary string
	// env says every flag may also come from an environment variable
	// (cmdline.Program.EnvName): the daemons', consume and serve, for a systemd
	// EnvironmentFile.
	env bool
	// groups, when set, lists the flags by what they are for, in that
	// order, and the help shows the first paragraph of help before them
	// and the rest after: a command of many flags (consume) shows what a
	// first run needs on the first screen.
	groups []cmdline.FlagGroup
	// opts returns a fresh value of the command's options (newOpts).
	opts func() options
}

// commands lists the subcommands in the order `spool help` shows them.
var commands []*command

func init() {
	commands = []*command{
		initCommand, checkCommand, enqueueCommand, consumeCommand, serveCommand, lagCommand, statusCommand,
		schemaCommand, dupsCommand, errorsCommand, showCommand, orderCheckCommand, replayCommand, discardCommand,
		tasksCommand, approveCommand, cancelCommand, resumeCommand, pauseCommand, holdCommand, releaseCommand, holdsCommand, policyCommand, tokenCommand, flushCommand,
		replaysCommand, auditCommand, fsckCommand, pruneCommand, backupCommand, relayCommand, demoCommand, benchCommand, completionCommand, manCommand, versionCommand,
	}
	for _, c := range commands {
		program.Commands = append(program.Commands, c.spec())
	}
}

// program is spool's command line as package cli renders it: help,
// completion, manual pages and the SPOOL_ variables, from commands.
var program = &cmdline.Program{
	Name:      "spool",
	EnvPrefix: "SPOOL_",
	// A program run by --exec that runs spool itself would take the
	// message's seq (SPOOL_SEQ) for --seq.
	Reserved:     handler.Vars,
	ReservedWhat: "which spool sets for the programs of --exec and --on-dead-letter",
	EnvHelp:      "\nEvery flag may also be set in the environment as SPOOL_ and its name in\ncapitals, - as _ (SPOOL_MAX_SIZE=64KiB for --max-size); a flag given wins.\n",
	ReservedHelp: "Not %s: their variables are the message's values that --exec hands its\nprogram; set them in spool.conf.\n",
	// The tests' switches and services (internal/testenv).
	OtherPrefixes: []string{"SPOOL_TEST_", "SPOOL_E2E_"},
	Description:   "consume a directory message queue into an idempotent ledger",
	ManSynopsis:   ".I COMMAND DIR\n[ARGS] [FLAGS]",
	ExitStatus:    "0 ok, 1 a check found a problem, 2 bad usage or configuration, 3 runtime failure, 4 consume stopped at a signal with calls cut short.",
}

// spec is c as package cli reads it, its flags bound on a fresh options
// value each time.
func (c *command) spec() *cmdline.Command {
	return &cmdline.Command{Name: c.name, Args: c.args, Summary: c.summary, Help: c.help(), Env: c.env, Groups: c.groups,
		Flags: func(fs *flag.FlagSet) { c.opts().flags(fs) }}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// unknownCommand is the line that refuses name, with the command it is
// likely a typo of: the same but for case, or within two edits (one for
// a name of three letters or fewer).
func unknownCommand(name string) string {
	best, bestD := "", 3
	if len(name) <= 3 {
		bestD = 2
	}
	for _, c := range commands {
		if strings.EqualFold(c.name, name) {
			best, bestD = c.name, -1
			break
		}
		if d := spelling.Distance(c.name, name); d < bestD {
			best, bestD = c.name, d
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown command (did you mean %s?)", best)
	}
	return "unknown command (run 'spool help' for the list)"
}

// env is what a command may touch besides the filesystem: its streams and
// its own name, for warnings and usage.
type env struct {
	cmd    *command
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// log, when set (consume --log-format json), receives the warnings
	// and the final error as records instead of lines.
	log *slog.Logger
	// long makes -h print the whole help (spool help COMMAND), not the
	// synopsis and flags.
	long bool
	// fromEnv lists the flags set from the environment (applyEnv), so
	// that an error about one names its variable.
	fromEnv []string
	// fs is the command's flag set once parsed, for given.
	fs *flag.FlagSet
}

// warn prints a one-line warning to stderr in the format of errors.
func (e *env) warn(format string, args ...any) {
	msg := oneLine(fmt.Sprintf(format, args...))
	if e.log != nil {
		e.log.Warn(msg, "command", e.cmd.name)
		return
	}
	fmt.Fprintf(e.stderr, "spool: %s: %s\n", e.cmd.name, msg)
}

// run is spool's whole command line, callable from tests: it returns the
// exit status instead of exiting.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		writeUsage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		return help(args[1:], stdout, stderr)
	case "-version", "--version":
		name = "version"
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(stderr, "spool: %s: %s\n", oneLine(name), unknownCommand(name))
		return exitUsage
	}
	e := &env{cmd: c, stdin: stdin, stdout: stdout, stderr: stderr}
	err := c.run(ctx, e, args[1:])
	return finish(e, err)
}

func help(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		writeUsage(stdout)
		return exitOK
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "spool: help: %s: %s\n", oneLine(args[0]), unknownCommand(args[0]))
		return exitUsage
	}
	// The command prints its own help, with its flags.
	e := &env{cmd: c, stdout: stdout, stderr: stderr, long: true}
	return finish(e, c.run(context.Background(), e, []string{"-h"}))
}

func writeUsage(w io.Writer) {
	fmt.Fprint(w, `spool consumes a directory message queue into an idempotent ledger.

Usage: spool COMMAND DIR [ARGS] [FLAGS]   (flags may also follow DIR)

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(c.name+" "+cmdline.Synopsis(c.args)), c.summary)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRun 'spool help COMMAND' for a command's flags. Try 'spool demo' first.\n%s\n",
		cmdline.Wrap("Exit status: "+program.ExitStatus, 76))
}

// flagSet returns the command's flag set. Errors and help are handled by
// parse, so the flag package prints nothing by itself.
func (e *env) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet(e.cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args with flags anywhere among the positionals. -h prints
// the command's help on stdout and returns errHelp.
func (e *env) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	e.fs = fs
	pos, err := cmdline.Parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		if e.long {
			program.WriteHelp(e.stdout, e.cmd.spec(), fs)
		} else {
			program.WriteShortHelp(e.stdout, e.cmd.spec(), fs)
		}
		return nil, errHelp
	}
	if err != nil {
		return nil, e.usage("%v", err)
	}
	if e.cmd.env {
		set, err := program.ApplyEnv(fs)
		if err != nil {
			return nil, e.usage("%v", err)
		}
		e.fromEnv = set
	}
	return pos, nil
}

// usage returns a usage error: its one line, then where the help is.
func (e *env) usage(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	for _, name := range e.fromEnv {
		if strings.HasPrefix(msg, cmdline.Dashed(name)+" ") || strings.HasPrefix(msg, cmdline.Dashed(name)+":") {
			msg += " (set by " + program.EnvName(name) + ")"
			break
		}
	}
	return &usageError{msg: msg, cmd: e.cmd.name}
}

// positionals checks the number of positional arguments: at least min, at
// most max (max < 0: no limit), naming the first missing one.
func (e *env) positionals(pos []string, min, max int, names ...string) error {
	if len(pos) < min {
		return e.usage("missing %s", names[len(pos)])
	}
	if max >= 0 && len(pos) > max {
		return e.usage("unexpected argument %q", pos[max])
	}
	for i, p := range pos {
		if p == "" {
			name := "argument"
			if i < len(names) {
				name = names[i]
			}
			return e.usage("%s is empty", name)
		}
	}
	return nil
}
