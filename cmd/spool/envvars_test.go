package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/cmdline"
)

func TestUnknownVars(t *testing.T) {
	for _, c := range []struct {
		env  string
		want string // "" for no line
	}{
		{"SPOOL_MIN_AGE=5s", ""},
		{"SPOOL_LISTEN=127.0.0.1:9464", ""},      // consume's and serve's
		{"SPOOL_AUTH=tokens", ""},                // serve's only
		{"SPOOL_MSG_ID=m1", ""},                  // set for --exec's program
		{"SPOOL_TEST_POSTGRES=postgres://x", ""}, // the tests'
		{"SPOOL_SEQ=3", ""},                      // a message's value, never --seq
		{"SPOOL_MINAGE=5s", "SPOOL_MINAGE is not a setting of spool: it is ignored (did you mean SPOOL_MIN_AGE, for --min-age?)"},
		{"spool_min_age=5s", "(did you mean SPOOL_MIN_AGE, for --min-age?)"},
		{"SPOOL_WATCHH=true", "(did you mean SPOOL_WATCH, for --watch?)"},
		{"SPOOL_NOTHING_LIKE_IT=1", "SPOOL_NOTHING_LIKE_IT is not a setting of spool: it is ignored"},
		{"PATH=/bin", ""},
	} {
		got := program.UnknownVars([]string{c.env})
		switch {
		case c.want == "" && len(got) != 0:
			t.Errorf("%s: %q, want nothing", c.env, got)
		case c.want != "" && (len(got) != 1 || !strings.Contains(got[0], c.want)):
			t.Errorf("%s: %q, want a line with %q", c.env, got, c.want)
		case strings.Contains(c.want, "NOTHING") && strings.Contains(got[0], "did you mean"):
			t.Errorf("%s: %q suggests a name far from it", c.env, got)
		}
	}
}

// The variables applyEnv reads are the ones the check knows: one table.
func TestKnownVarsAreRead(t *testing.T) {
	known := program.KnownVars()
	for _, c := range commands {
		if !c.Env {
			continue
		}
		for _, f := range c.FlagList() {
			v, read := program.FlagVar(f.Name)
			if _, ok := known[v]; !ok {
				t.Errorf("%s's --%s (%s) is not known", c.Name, f.Name, v)
			}
			if !read && !strings.Contains(known[v], "sets for the programs") {
				t.Errorf("%s is not read, yet known as %q", v, known[v])
			}
		}
	}
	if !slices.ContainsFunc(commands, func(c *cmdline.Command) bool { return c.Env }) {
		t.Fatal("no command reads the environment")
	}
}
