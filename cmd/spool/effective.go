package main

import (
	"flag"
	"slices"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/queueopen"
)

// optionValues are consume's flags fs once parsed and read from the
// environment (fromEnv lists the flags the environment set), as the
// library's options of a run with where each came from, for
// queueopen.Settings: which value wins and how it is shown is the
// library's.
func optionValues(fs *flag.FlagSet, fromEnv []string) []queueopen.OptionValue {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var out []queueopen.OptionValue
	fs.VisitAll(func(f *flag.Flag) {
		o := queueopen.OptionValue{Name: f.Name, Value: f.Value.String(), From: queueopen.FromDefault}
		if g, ok := f.Value.(flag.Getter); ok {
			switch v := g.Get().(type) {
			case bool, int, int64, uint, uint64, float64, time.Duration, string:
				o.Value = v
			}
		}
		switch {
		case slices.Contains(fromEnv, f.Name):
			o.From, _ = program.FlagVar(f.Name)
		case set[f.Name]:
			o.From = queueopen.FromFlag
		}
		out = append(out, o)
	})
	return out
}

// effectiveConfig is the configuration consume runs with
// (queueopen.Settings) given its flags fs, the contract c and
// spool.conf as read (conf) and as the run reads it (run).
func effectiveConfig(fs *flag.FlagSet, fromEnv []string, c *spool.Contract, conf, run *queueopen.Config) []queueopen.Setting {
	return queueopen.Settings(optionValues(fs, fromEnv), c, conf, run)
}
