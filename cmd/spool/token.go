package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/spoolq/spool/task"
)

var tokenCommand = &command{
	name:    "token",
	args:    "add TOKENFILE NAME ROLE [--os USER]",
	summary: "add an identity to serve --auth's token file, and print its new token once",
	opts:    newOpts[tokenOpts],
}

// tokenOpts are spool token add's.
type tokenOpts struct {
	path, name string
	role       task.Role
	osUserName *string
}

func (o *tokenOpts) flags(fs *flag.FlagSet) {
	o.osUserName = fs.String("os", "", "the OS user `USER` the token's holder is (os=USER on the line), for four eyes")
}

func (o *tokenOpts) validate(e *env, pos []string) (err error) {
	if len(pos) == 0 || pos[0] != "add" {
		return e.usage("want spool token add TOKENFILE NAME ROLE")
	}
	if err := e.positionals(pos[1:], 3, 3, "TOKENFILE", "NAME", "ROLE"); err != nil {
		return err
	}
	o.path, o.name = pos[1], pos[2]
	if o.role, err = task.ParseRole(pos[3]); err != nil {
		return e.usage("%v", err)
	}
	if e.given("os") && *o.osUserName == "" {
		return e.usage("--os is empty: want the OS user's name")
	}
	return nil
}

func (o *tokenOpts) run(_ context.Context, e *env) error {
	token, err := task.AddToken(o.path, o.name, o.role, *o.osUserName)
	if errors.Is(err, task.ErrTokenRefused) {
		// Nothing written: the command line or the file must change.
		return &usageError{msg: err.Error()}
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.stdout, token)
	return err
}
