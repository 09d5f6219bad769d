// Package cmdline is the generic machinery of a command line of subcommands,
// each a type with its own flag set (Options: Flags, Validate, Run):
// dispatching a command line to its command (Program.Run), parsing flags
// anywhere among the positional arguments, with errors in the command
// line's own terms (UsageError, a typo'd command or flag named with the
// one it is near); the help of a command, its flags listed by group;
// flags read from environment variables; and, from the same definitions,
// completion scripts and manual pages. It knows no command: a Program
// lists them, and the commands (their names, flags and help text) stay
// with the program that defines them (cmd/spool), so that a flag is
// defined once and every face of the command line reads that one
// definition.
//
// It prints only to the writers it is given (Env) and never exits; how an
// error maps to an exit status is the program's (Program.ExitCode).
package cmdline
