package main

import (
	"context"
	"flag"
	"fmt"
	"runtime/debug"

	"github.com/spoolq/spool/internal/cmdline"
)

var versionCommand = &cmdline.Command{
	Name:    "version",
	Summary: "print spool's version, from the build information",
	Options: cmdline.New[versionOpts],
}

// versionOpts are spool version's: none.
type versionOpts struct{}

func (*versionOpts) Flags(*flag.FlagSet) {}

func (*versionOpts) Validate(e *env, pos []string) error { return e.Positionals(pos, 0, 0) }

func (*versionOpts) Run(_ context.Context, e *env) error {
	fmt.Fprintln(e.Stdout, "spool "+version())
	return nil
}

func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
			if len(rev) > 12 {
				rev = rev[:12]
			}
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev != "" {
		v += fmt.Sprintf(" (%s%s)", rev, dirty)
	}
	return v + " " + bi.GoVersion
}
