package handler

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
)

// ErrNotRunnable is wrapped by CheckCommand for an Exec command whose
// program cannot be found or executed, and by Exec.Call when the shell
// says so at run time (exit status 126 or 127). Such a failure is the
// configuration's, not the message's: a consumer that dead-lettered on it
// would empty its queue into error/ in a second (spool consume stops
// instead, leaving the message in inbox/).
var ErrNotRunnable = errors.New("command cannot be run")

// Exit statuses /bin/sh gives a command it could not run (POSIX, "Exit
// Status for Commands").
const (
	exitNotExecutable = 126
	exitNotFound      = 127
)

// notRunnable reports whether a shell's exit status says it could not run
// the command: found but not executable, or not found.
func notRunnable(code int) bool { return code == exitNotExecutable || code == exitNotFound }

// shellWords are the words that can begin a shell command without being a
// program in PATH: keywords and the builtins of POSIX sh and dash.
var shellWords = map[string]bool{
	"!": true, ".": true, ":": true, "[": true, "{": true, "}": true,
	"alias": true, "bg": true, "break": true, "case": true, "cd": true, "command": true,
	"continue": true, "do": true, "done": true, "echo": true, "elif": true, "else": true,
	"esac": true, "eval": true, "exec": true, "exit": true, "export": true, "false": true,
	"fc": true, "fg": true, "fi": true, "for": true, "getopts": true, "hash": true, "if": true,
	"jobs": true, "kill": true, "local": true, "printf": true, "pwd": true, "read": true,
	"readonly": true, "return": true, "set": true, "shift": true, "test": true, "then": true,
	"times": true, "trap": true, "true": true, "type": true, "ulimit": true, "umask": true,
	"unalias": true, "unset": true, "until": true, "wait": true, "while": true,
}

// CheckCommand checks, before anything is consumed, that the program an
// Exec command begins with can be run: a path must name an executable
// file, a bare name must be found in PATH as /bin/sh would look it up.
// It wraps ErrNotRunnable when not. A command whose first word the shell
// would expand or interpret (quotes, variables, assignments, redirections,
// subshells) or that is a shell keyword or builtin is not judged: nil.
func CheckCommand(command string) error {
	words := strings.Fields(command)
	if len(words) == 0 {
		return fmt.Errorf("check command: %w: it is empty", ErrNotRunnable)
	}
	prog := words[0]
	if shellWords[prog] || strings.ContainsAny(prog, "$`'\"\\(){}<>|&;*?[]~=#") {
		return nil
	}
	if _, err := exec.LookPath(prog); err != nil {
		var why string
		switch {
		case errors.Is(err, exec.ErrNotFound):
			why = "not found in PATH"
		case strings.Contains(prog, "/"):
			why = unwrapPathError(err)
		default:
			why = err.Error()
		}
		return fmt.Errorf("check command: %w: %s: %s", ErrNotRunnable, prog, why)
	}
	return nil
}

// unwrapPathError is the cause of a LookPath failure for a path, without
// the path LookPath repeats: "no such file or directory", "permission
// denied", "is a directory".
func unwrapPathError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var ee *exec.Error
	if errors.As(err, &ee) && ee.Err != nil {
		return ee.Err.Error()
	}
	return err.Error()
}
