package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/batch"
	"github.com/spoolq/spool/internal/cmdline"
	"github.com/spoolq/spool/queueopen"
)

// setting is one value of the configuration consume runs with, and where
// it came from: spool check prints them, and consume logs them at start,
// so that what runs is never a guess from a unit file, an environment
// file and a spool.conf read together.
type setting struct {
	group int    // its group in consumeGroups
	name  string // the flag's name
	value any    // typed, for the log: bool, int, a duration, a string...
	from  string // "flag", the variable (SPOOL_MIN_AGE), "spool.conf" or "default"
	// fileOnly: a key of spool.conf that no flag sets (headers).
	fileOnly bool
}

// Where a setting came from, but for a variable, which is named.
const (
	fromFlag    = "flag"
	fromFile    = configName
	fromDefault = "default"
)

// effectiveConfig returns the settings of consume's flags fs once parsed
// and read from the environment (fromEnv lists the flags the environment
// set), by group. The contract's are c's, the contract read from
// DIR/spool.conf (conf, nil without one) and the flags; c nil leaves them
// out (a spool.conf that cannot be read). A queue of batch files has its
// format among them, as the run reads it (run: conf with the format
// flags, queueopen.FormatOverride.Apply), in one setting.
func effectiveConfig(fs *flag.FlagSet, fromEnv []string, c *spool.Contract, conf, run *queueopen.Config) []setting {
	var file *spool.Contract
	if conf != nil {
		file = &conf.Contract
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	source := func(name string, inFile bool) string {
		switch {
		case slices.Contains(fromEnv, name):
			v, _ := program.FlagVar(name)
			return v
		case set[name]:
			return fromFlag
		case inFile:
			return fromFile
		}
		return fromDefault
	}
	var out []setting
	var all []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { all = append(all, f) })
	for g, flags := range cmdline.GroupFlags(all, consumeGroups) {
		for _, f := range flags {
			if slices.Contains(formatFlagNames, f.Name) {
				continue // the format is one setting, below
			}
			s := setting{group: g, name: f.Name, value: flagValue(f), from: source(f.Name, false)}
			if slices.Contains(consumeGroups[0].Names, f.Name) {
				if c == nil {
					continue
				}
				s.value, s.from = contractValue(f.Name, *c, file, source)
			}
			out = append(out, s)
		}
		if g == 0 && c != nil {
			h, from := "", fromDefault
			if file != nil && file.Headers != (spool.HeaderFields{}) {
				from = fromFile
				var parts []string
				for _, p := range [][2]string{{"version", c.Headers.Version}, {"trace", c.Headers.Trace}, {"tenant", c.Headers.Tenant}} {
					if p[1] != "" {
						parts = append(parts, p[0]+"="+p[1])
					}
				}
				h = strings.Join(parts, ",")
			}
			out = append(out, setting{group: g, name: "headers", value: h, from: from, fileOnly: true})
			if run != nil && run.Format.Kind != "" {
				from := fromFile
				if conf == nil || conf.Format.Kind == "" {
					from = fromFlag
				}
				out = append(out, setting{group: g, name: "format", value: formatText(run.Format), from: from, fileOnly: true})
			}
		}
	}
	return out
}

// contractValue is the contract's value for one contract flag, and where
// it came from: the flag (or its variable), spool.conf, or the default.
func contractValue(name string, c spool.Contract, file *spool.Contract, source func(string, bool) string) (any, string) {
	switch name {
	case "key":
		return c.KeyField, source(name, file != nil && file.KeyField != "")
	case "order-key":
		return c.OrderField, source(name, file != nil && file.OrderField != "")
	case "seq":
		return c.SeqField, source(name, file != nil && file.SeqField != "")
	case "amount":
		return c.AmountField, source(name, file != nil && file.AmountField != "")
	case "require":
		return slices.Clone(c.Required), source(name, file != nil && file.Required != nil)
	}
	return c.MaxSize, source(name, file != nil && file.MaxSize != 0) // max-size
}

// flagValue is a flag's value, typed when the flag says its type, with
// any password in a URL (--db, --dedup, --post) masked.
func flagValue(f *flag.Flag) any {
	if g, ok := f.Value.(flag.Getter); ok {
		switch v := g.Get().(type) {
		case bool, int, int64, uint, uint64, float64, time.Duration:
			return v
		case string:
			return redact(v)
		}
	}
	return redact(f.Value.String())
}

// redact masks the password of a URL, and the values of its query
// parameters that name a password, secret or token: the configuration is
// logged, and a log is read by more people than a unit file.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return s
	}
	masked := false
	if _, ok := u.User.Password(); ok {
		masked = true
	}
	q := u.Query()
	for k := range q {
		lk := strings.ToLower(k)
		if strings.Contains(lk, "pass") || strings.Contains(lk, "secret") || strings.Contains(lk, "token") {
			q.Set(k, "xxxxx")
			masked = true
		}
	}
	if !masked {
		return s
	}
	u.RawQuery = q.Encode()
	return u.Redacted()
}

// text is a setting's value as a flag would take it: lists
// comma-separated, "" for none.
func (s setting) text() string {
	switch v := s.value.(type) {
	case []string:
		return strings.Join(v, ",")
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return fmt.Sprint(s.value)
}

// groupName is the short name of a group of consumeGroups, its title up
// to the parenthesis: Contract, Handlers.
func groupName(g int) string {
	name, _, _ := strings.Cut(consumeGroups[g].Title, " (")
	return name
}

// writeConfig prints settings for people: by group, one a line, with
// where each came from.
func writeConfig(w io.Writer, settings []setting) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	group := -1
	for _, s := range settings {
		if s.group != group {
			group = s.group
			fmt.Fprintf(tw, "%s:\t\t\n", groupName(group))
		}
		v := s.text()
		if v == "" {
			v = "(none)"
		}
		name := cmdline.Dashed(s.name)
		if s.fileOnly {
			name = s.name
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, oneLine(v), s.from)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// A group's line has empty cells, which the writer pads.
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if _, err := io.WriteString(w, strings.TrimRight(line, " ")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// logConfig logs settings in one record, msg "configuration": the value of
// every setting under settings, and where each that is not a default came
// from under from, keys as the flags' names with _ for -.
func logConfig(l *slog.Logger, queue string, settings []setting) {
	var values, from []any
	for _, s := range settings {
		key := strings.ReplaceAll(s.name, "-", "_")
		values = append(values, slog.Any(key, s.value))
		if s.from != fromDefault {
			from = append(from, slog.String(key, s.from))
		}
	}
	l.Info("configuration", "queue", queue, slog.Group("settings", values...), slog.Group("from", from...))
}

// formatText says a batch format in one value: its kind, then the keys
// spool.conf set beside it.
func formatText(f batch.Format) string {
	parts := []string{f.Kind}
	for _, kv := range [][2]string{{"encoding", f.Encoding}, {"delimiter", f.Delimiter}, {"comment", f.Comment},
		{"record", f.Record}, {"include", strings.Join(f.Include, ",")}, {"done_file", f.DoneFile}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if f.HashKey {
		parts = append(parts, "key=hash")
	}
	return strings.Join(parts, " ")
}
