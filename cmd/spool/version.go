package main

import (
	"context"
	"flag"
	"fmt"
	"runtime/debug"
)

var versionCommand = &command{
	name:    "version",
	summary: "print spool's version, from the build information",
	opts:    newOpts[versionOpts],
}

// versionOpts are spool version's: none.
type versionOpts struct{}

func (*versionOpts) flags(*flag.FlagSet) {}

func (*versionOpts) validate(e *env, pos []string) error { return e.positionals(pos, 0, 0) }

func (*versionOpts) run(_ context.Context, e *env) error {
	fmt.Fprintln(e.stdout, "spool "+version())
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
