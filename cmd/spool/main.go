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
	"io"
	"os"

	"github.com/spoolq/spool/handler"
	"github.com/spoolq/spool/internal/cmdline"
)

func main() {
	// The clients' own lines (go-redis, the MySQL driver, ...) go through
	// spool's logger, not straight to stderr (clientlog.go).
	routeClientLogs(os.Stderr)
	code := run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	clientLogs.Flush()
	os.Exit(code)
}

// commands lists the subcommands in the order `spool help` shows them.
var commands []*cmdline.Command

func init() {
	commands = []*cmdline.Command{
		initCommand, checkCommand, enqueueCommand, consumeCommand, serveCommand, lagCommand, statusCommand,
		schemaCommand, dupsCommand, errorsCommand, showCommand, orderCheckCommand, replayCommand, discardCommand,
		tasksCommand, approveCommand, cancelCommand, resumeCommand, pauseCommand, holdCommand, releaseCommand, holdsCommand, policyCommand, tokenCommand, flushCommand,
		replaysCommand, auditCommand, fsckCommand, pruneCommand, backupCommand, relayCommand, demoCommand, benchCommand, completionCommand, manCommand, versionCommand,
	}
	for _, c := range commands {
		c.Help = help(c.Name)
	}
	program.Commands = commands
}

// env is what a command may touch besides the filesystem: its streams,
// its command, its flags (package cmdline).
type env = cmdline.Env

// program is spool's command line as package cmdline runs and renders
// it: dispatch, help, completion, manual pages and the SPOOL_ variables,
// from commands.
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
	Headline:      "spool consumes a directory message queue into an idempotent ledger.",
	Usage:         "spool COMMAND DIR [ARGS] [FLAGS]   (flags may also follow DIR)",
	UsageHint:     " Try 'spool demo' first.",
	ExitCode:      exitCode,
	OneLine:       oneLine,
}

// run is spool's whole command line, callable from tests: it returns the
// exit status instead of exiting.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return program.Run(ctx, args, stdin, stdout, stderr)
}
