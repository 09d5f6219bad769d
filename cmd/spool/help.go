package main

import (
	"embed"
	"strings"
)

// helpText holds each command's longer description for `spool help
// COMMAND` and its manual page, one plain-text file per command named
// after it (help/replay.txt): prose is read and reviewed as prose, and the
// Go files hold the command's flags and code.
//
//go:embed help/*.txt
var helpText embed.FS

// help is the command name's description (help/NAME.txt), with the leading
// newline that separates it from the synopsis. A command without its
// file is a build mistake that TestEveryCommandHasHelp catches; here it
// has no description rather than a panic.
func help(name string) string {
	b, err := helpText.ReadFile("help/" + name + ".txt")
	if err != nil {
		return ""
	}
	return "\n" + strings.TrimSuffix(string(b), "\n")
}
