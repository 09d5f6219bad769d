package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spoolq/spool/internal/cmdline"
)

var completionCommand = &cmdline.Command{
	Name:    "completion",
	Args:    "bash|zsh|fish",
	Summary: "print a shell completion script for spool's commands and flags",
	Options: cmdline.New[completionOpts],
}

var manCommand = &cmdline.Command{
	Name:    "man",
	Args:    "DIR",
	Summary: "write the manual pages, spool.1 and spool-COMMAND.1, into DIR",
	Options: cmdline.New[manOpts],
}

// completionOpts are spool completion's: the shell named.
type completionOpts struct{ shell string }

func (*completionOpts) Flags(*flag.FlagSet) {}

func (o *completionOpts) Validate(e *env, pos []string) error {
	if err := e.Positionals(pos, 1, 1, "SHELL"); err != nil {
		return err
	}
	o.shell = pos[0]
	return nil
}

func (o *completionOpts) Run(_ context.Context, e *env) error {
	if err := program.Completion(e.Stdout, o.shell); err != nil {
		return e.Usage("%v", err)
	}
	return nil
}

// manOpts are spool man's: the directory the pages go to.
type manOpts struct{ dir string }

func (*manOpts) Flags(*flag.FlagSet) {}

func (o *manOpts) Validate(e *env, pos []string) error {
	if err := e.Positionals(pos, 1, 1, "DIR"); err != nil {
		return err
	}
	o.dir = pos[0]
	if fi, err := os.Stat(o.dir); err != nil || !fi.IsDir() {
		return e.Usage("%s: not a directory", o.dir)
	}
	return nil
}

func (o *manOpts) Run(_ context.Context, e *env) error {
	dir := o.dir
	date := time.Now().UTC().Format("2006-01-02")
	if err := writeManFile(filepath.Join(dir, "spool.1"), func(w io.Writer) { program.ManIndex(w, date) }); err != nil {
		return err
	}
	for _, c := range commands {
		if err := writeManFile(filepath.Join(dir, "spool-"+c.Name+".1"), func(w io.Writer) { program.ManPage(w, c, date) }); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.Stdout, "wrote %d manual pages to %s\n", len(commands)+1, dir)
	return nil
}

// writeManFile writes one page, atomically.
func writeManFile(path string, fill func(io.Writer)) error {
	return output(nil, path, func(w io.Writer) error { fill(w); return nil })
}
