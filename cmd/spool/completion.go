package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

var completionCommand = &command{
	name:    "completion",
	args:    "bash|zsh|fish",
	summary: "print a shell completion script for spool's commands and flags",
	opts:    newOpts[completionOpts],
}

var manCommand = &command{
	name:    "man",
	args:    "DIR",
	summary: "write the manual pages, spool.1 and spool-COMMAND.1, into DIR",
	opts:    newOpts[manOpts],
}

// completionOpts are spool completion's: the shell named.
type completionOpts struct{ shell string }

func (*completionOpts) flags(*flag.FlagSet) {}

func (o *completionOpts) validate(e *env, pos []string) error {
	if err := e.positionals(pos, 1, 1, "SHELL"); err != nil {
		return err
	}
	o.shell = pos[0]
	return nil
}

func (o *completionOpts) run(_ context.Context, e *env) error {
	if err := program.Completion(e.stdout, o.shell); err != nil {
		return e.usage("%v", err)
	}
	return nil
}

// manOpts are spool man's: the directory the pages go to.
type manOpts struct{ dir string }

func (*manOpts) flags(*flag.FlagSet) {}

func (o *manOpts) validate(e *env, pos []string) error {
	if err := e.positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	o.dir = pos[0]
	if fi, err := os.Stat(o.dir); err != nil || !fi.IsDir() {
		return e.usage("%s: not a directory", o.dir)
	}
	return nil
}

func (o *manOpts) run(_ context.Context, e *env) error {
	dir := o.dir
	date := time.Now().UTC().Format("2006-01-02")
	if err := writeManFile(filepath.Join(dir, "spool.1"), func(w io.Writer) { program.ManIndex(w, date) }); err != nil {
		return err
	}
	for _, c := range commands {
		if err := writeManFile(filepath.Join(dir, "spool-"+c.name+".1"), func(w io.Writer) { program.ManPage(w, c.spec(), date) }); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stdout, "wrote %d manual pages to %s\n", len(commands)+1, dir)
	return nil
}

// writeManFile writes one page, atomically.
func writeManFile(path string, fill func(io.Writer)) error {
	return (&env{}).output(path, func(w io.Writer) error { fill(w); return nil })
}
