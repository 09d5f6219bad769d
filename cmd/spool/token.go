package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/task"
)

var tokenCommand = &cmdline.Command{
	Name:    "token",
	Args:    "add TOKENFILE NAME ROLE [--os USER]",
	Summary: "add an identity to serve --auth's token file, and print its new token once",
	Options: cmdline.New[tokenOpts],
}

// tokenOpts are spool token add's.
type tokenOpts struct {
	path, name string
	role       task.Role
	osUserName *string
}

func (o *tokenOpts) Flags(fs *flag.FlagSet) {
	o.osUserName = fs.String("os", "", "the OS user `USER` the token's holder is (os=USER on the line), for four eyes")
}

func (o *tokenOpts) Validate(e *env, pos []string) (err error) {
	if len(pos) == 0 || pos[0] != "add" {
		return e.Usage("want spool token add TOKENFILE NAME ROLE")
	}
	if err := e.Positionals(pos[1:], 3, 3, "TOKENFILE", "NAME", "ROLE"); err != nil {
		return err
	}
	o.path, o.name = pos[1], pos[2]
	if o.role, err = task.ParseRole(pos[3]); err != nil {
		return e.Usage("%v", err)
	}
	if e.Given("os") && *o.osUserName == "" {
		return e.Usage("--os is empty: want the OS user's name")
	}
	return nil
}

func (o *tokenOpts) Run(_ context.Context, e *env) error {
	token, err := task.AddToken(o.path, o.name, o.role, *o.osUserName)
	if errors.Is(err, task.ErrTokenRefused) {
		// Nothing written: the command line or the file must change.
		return &cmdline.UsageError{Msg: err.Error()}
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.Stdout, token)
	return err
}
