package cmdline

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

// greetOpts is a toy command: greet NAME [--loud], a warning for a long
// name, ErrReported for the name "nobody".
type greetOpts struct {
	name string
	loud *bool
}

func (o *greetOpts) Flags(fs *flag.FlagSet) { o.loud = fs.Bool("loud", false, "shout") }

func (o *greetOpts) Validate(e *Env, pos []string) error {
	if err := e.Positionals(pos, 1, 1, "NAME"); err != nil {
		return err
	}
	o.name = pos[0]
	if o.name == "bad" {
		return e.Usage("--loud is no use on %s", o.name)
	}
	return nil
}

func (o *greetOpts) Run(_ context.Context, e *Env) error {
	switch {
	case o.name == "nobody":
		return ErrReported
	case o.name == "broken":
		return errors.New("greet: it broke\non two lines")
	case len(o.name) > 5:
		e.Warn("a long name")
	}
	msg := "hello " + o.name
	if *o.loud {
		msg = strings.ToUpper(msg)
	}
	_, err := e.Stdout.Write([]byte(msg + "\n"))
	return err
}

func toyProgram() *Program {
	return &Program{
		Name: "toy", EnvPrefix: "TOY_", Headline: "toy greets.", Usage: "toy COMMAND NAME", ExitStatus: "0 ok.",
		Commands: []*Command{{Name: "greet", Args: "NAME [--loud]", Summary: "say hello", Env: true, Options: New[greetOpts]}},
		ExitCode: func(err error) int {
			var u *UsageError
			switch {
			case err == nil, errors.Is(err, ErrHelp):
				return 0
			case errors.Is(err, ErrReported):
				return 1
			case errors.As(err, &u):
				return 2
			}
			return 3
		},
	}
}

// TestRun drives a toy program through Run as main would: dispatch,
// flags anywhere and from the environment, usage errors with where the
// help is, help, a typo'd command, errors on one line, and the exit
// status the program maps each to.
func TestRun(t *testing.T) {
	for _, c := range []struct {
		args           []string
		env            string
		code           int
		stdout, stderr string
	}{
		{args: []string{"greet", "ann"}, stdout: "hello ann\n"},
		{args: []string{"greet", "--loud", "ann"}, stdout: "HELLO ANN\n"},
		{args: []string{"greet", "ann", "--loud"}, stdout: "HELLO ANN\n"},
		{args: []string{"greet", "ann"}, env: "true", stdout: "HELLO ANN\n"},
		{args: []string{"greet", "ann"}, env: "maybe", code: 2, stderr: "toy: greet: TOY_LOUD"},
		{args: []string{"greet", "annabel"}, stdout: "hello annabel\n", stderr: "toy: greet: a long name\n"},
		{args: []string{"greet"}, code: 2, stderr: "toy: greet: missing NAME. Try: toy help greet\n"},
		{args: []string{"greet", "a", "b"}, code: 2, stderr: `toy: greet: unexpected argument "b". Try: toy help greet` + "\n"},
		{args: []string{"greet", ""}, code: 2, stderr: "toy: greet: NAME is empty. Try: toy help greet\n"},
		{args: []string{"greet", "bad", "--loud"}, code: 2, stderr: "toy: greet: --loud is no use on bad. Try: toy help greet\n"},
		{args: []string{"greet", "--lodu", "x"}, code: 2, stderr: "--loud"},
		{args: []string{"greet", "nobody"}, code: 1},
		{args: []string{"greet", "broken"}, code: 3, stderr: "toy: greet: greet: it broke on two lines\n"},
		{args: []string{"gret", "ann"}, code: 2, stderr: "toy: gret: unknown command (did you mean greet?)\n"},
		{args: []string{"zzzzzz"}, code: 2, stderr: "toy: zzzzzz: unknown command (run 'toy help' for the list)\n"},
		{args: []string{"help", "gret"}, code: 2, stderr: "toy: help: gret: unknown command (did you mean greet?)\n"},
		{args: nil, code: 2, stderr: "Usage: toy COMMAND NAME"},
		{args: []string{"help"}, stdout: "  greet NAME  say hello\n"},
		{args: []string{"help", "greet"}, stdout: "-loud"},
		{args: []string{"greet", "-h"}, stdout: "Run 'toy help greet' for the whole description."},
	} {
		t.Run(strings.Join(c.args, " ")+" "+c.env, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("TOY_LOUD", c.env)
			}
			var stdout, stderr bytes.Buffer
			code := toyProgram().Run(context.Background(), c.args, nil, &stdout, &stderr)
			if code != c.code || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) ||
				(c.stderr == "" && stderr.Len() > 0) || (c.stdout == "" && stdout.Len() > 0) {
				t.Errorf("toy %q (TOY_LOUD=%q): exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
					c.args, c.env, code, stdout.String(), stderr.String(), c.code, c.stdout, c.stderr)
			}
		})
	}
}
