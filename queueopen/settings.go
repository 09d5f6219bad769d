package queueopen

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/batch"
	"github.com/spoolq/spool/report"
)

// SettingGroup is a group of a consumer's settings by what they are for:
// its title, and the names of its settings (the command line's flags),
// in order; nil Names holds every setting no other group names.
type SettingGroup struct {
	Title string
	Names []string
}

// FormatSettings are the settings of a batch format (FormatFlag of each
// of batch.ConfigKeys, in their order), which Settings reports as one,
// "format".
var FormatSettings = func() []string {
	var names []string
	for _, k := range batch.ConfigKeys {
		names = append(names, FormatFlag(k))
	}
	return names
}()

// SettingGroups are a consumer's settings by group, in the order spool
// consume's help, spool check and the log list them: what a first queue
// needs comes first. The first group is the contract's, over spool.conf;
// the last, without names, holds the rest.
var SettingGroups = []SettingGroup{
	{Title: "Contract (DIR/spool.conf, which spool init writes; a flag wins)", Names: []string{"key", "order-key", "seq", "amount", "require", "max-size"}},
	{Title: "Format (batch files, where DIR/spool.conf sets no format)", Names: FormatSettings},
	{Title: "Handlers (at most one of --exec, --sql, --post)", Names: []string{"exec", "exec-timeout", "sql", "sql-timeout", "post", "post-timeout"}},
	{Title: "Service", Names: []string{"watch", "min-age", "poll", "db", "log-format", "log-level", "shutdown-timeout", "on-dead-letter", "on-dead-letter-timeout", "listen", "tls-cert", "tls-key", "auth"}},
	{Title: "Retries", Names: []string{"retry-base", "retry-cap", "retry-max", "retry-jitter", "retry-wait", "pause-after"}},
	{Title: "Concurrency", Names: []string{"concurrency", "ordered", "rate", "workers", "batch"}},
	{Title: "Advanced", Names: nil}, // the rest
}

// Where a setting came from, but for an environment variable, which is
// named (SPOOL_MIN_AGE).
const (
	FromFlag    = "flag"
	FromFile    = ConfigName
	FromDefault = "default"
)

// OptionValue is one option of a run as the program has it: its name
// (the flag's), its value, typed (bool, int, a duration, a string...),
// and where the program got it: FromFlag, an environment variable's
// name, or FromDefault when nothing set it.
type OptionValue struct {
	Name  string
	Value any
	From  string
}

// Setting is one value of the configuration a consumer runs with, and
// where it came from, so that what runs is never a guess from a unit
// file, an environment file and a spool.conf read together.
type Setting struct {
	Group int    // its index in SettingGroups
	Name  string // the option's name (the flag's)
	Value any    // typed, for a log: bool, int, a duration, a string...
	From  string // FromFlag, a variable (SPOOL_MIN_AGE), FromFile or FromDefault
	// FileOnly: a key of spool.conf that no option sets alone (headers,
	// the format as a whole).
	FileOnly bool
}

// Settings are the settings a consumer given opts runs with, by group
// (SettingGroups), each group's in its order and the rest in opts'.
// Which value wins is the queue's rule: the contract's values are c's
// (LoadContract: an option set, else spool.conf, else the default), and
// one comes from spool.conf when no option set it and conf (the file as
// read, nil without one) holds it; c nil leaves the contract out (a
// spool.conf that cannot be read). A queue of batch files has its format
// as run reads it (conf with the run's FormatOverride applied) in one
// setting. A string value that is a URL has its password masked (Redact).
func Settings(opts []OptionValue, c *spool.Contract, conf, run *Config) []Setting {
	var file *spool.Contract
	if conf != nil {
		file = &conf.Contract
	}
	source := func(o OptionValue, inFile bool) string {
		switch {
		case o.From != FromDefault && o.From != "":
			return o.From
		case inFile:
			return FromFile
		}
		return FromDefault
	}
	var out []Setting
	for g, group := range groupOptions(opts) {
		for _, o := range group {
			if slices.Contains(FormatSettings, o.Name) {
				continue // the format is one setting, below
			}
			s := Setting{Group: g, Name: o.Name, Value: redactValue(o.Value), From: source(o, false)}
			if slices.Contains(SettingGroups[0].Names, o.Name) {
				if c == nil {
					continue
				}
				s.Value, s.From = contractValue(o, *c, file, source)
			}
			out = append(out, s)
		}
		if g == 0 && c != nil {
			h, from := "", FromDefault
			if file != nil && file.Headers != (spool.HeaderFields{}) {
				from = FromFile
				var parts []string
				for _, p := range [][2]string{{"version", c.Headers.Version}, {"trace", c.Headers.Trace}, {"tenant", c.Headers.Tenant}} {
					if p[1] != "" {
						parts = append(parts, p[0]+"="+p[1])
					}
				}
				h = strings.Join(parts, ",")
			}
			out = append(out, Setting{Group: g, Name: "headers", Value: h, From: from, FileOnly: true})
			if run != nil && run.Format.Kind != "" {
				from := FromFile
				if conf == nil || conf.Format.Kind == "" {
					from = FromFlag
				}
				out = append(out, Setting{Group: g, Name: "format", Value: FormatText(run.Format), From: from, FileOnly: true})
			}
		}
	}
	return out
}

// groupOptions returns opts by group of SettingGroups, each group's in
// its order; the rest, in the order given, in the group without names.
func groupOptions(opts []OptionValue) [][]OptionValue {
	out := make([][]OptionValue, len(SettingGroups))
	byName := map[string]OptionValue{}
	for _, o := range opts {
		byName[o.Name] = o
	}
	listed := map[string]bool{}
	for i, g := range SettingGroups {
		for _, name := range g.Names {
			if o, ok := byName[name]; ok {
				out[i] = append(out[i], o)
				listed[name] = true
			}
		}
	}
	for _, o := range opts {
		if listed[o.Name] {
			continue
		}
		for i, g := range SettingGroups {
			if g.Names == nil {
				out[i] = append(out[i], o)
				break
			}
		}
	}
	return out
}

// contractValue is the contract's value for one contract option, and
// where it came from: the option (a flag or its variable), spool.conf, or
// the default.
func contractValue(o OptionValue, c spool.Contract, file *spool.Contract, source func(OptionValue, bool) string) (any, string) {
	switch o.Name {
	case "key":
		return c.KeyField, source(o, file != nil && file.KeyField != "")
	case "order-key":
		return c.OrderField, source(o, file != nil && file.OrderField != "")
	case "seq":
		return c.SeqField, source(o, file != nil && file.SeqField != "")
	case "amount":
		return c.AmountField, source(o, file != nil && file.AmountField != "")
	case "require":
		return slices.Clone(c.Required), source(o, file != nil && file.Required != nil)
	}
	return c.MaxSize, source(o, file != nil && file.MaxSize != 0) // max-size
}

// redactValue is v with Redact applied when it is a string.
func redactValue(v any) any {
	if s, ok := v.(string); ok {
		return Redact(s)
	}
	return v
}

// Redact masks the password of a URL, and the values of its query
// parameters that name a password, secret or token: the configuration is
// logged, and a log is read by more people than a unit file. Anything
// but a URL with a host is returned as it is.
func Redact(s string) string {
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

// Text is a setting's value as a flag would take it: lists
// comma-separated, "" for none.
func (s Setting) Text() string {
	switch v := s.Value.(type) {
	case []string:
		return strings.Join(v, ",")
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return fmt.Sprint(s.Value)
}

// groupName is the short name of a group of SettingGroups, its title up
// to the parenthesis: Contract, Handlers.
func groupName(g int) string {
	name, _, _ := strings.Cut(SettingGroups[g].Title, " (")
	return name
}

// WriteSettings writes settings for people to w, as spool check prints
// them: by group, one a line, FLAG VALUE FROM ("(none)" for an empty
// value), a key of spool.conf alone under its own name.
func WriteSettings(w io.Writer, settings []Setting) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	group := -1
	for _, s := range settings {
		if s.Group != group {
			group = s.Group
			fmt.Fprintf(tw, "%s:\t\t\n", groupName(group))
		}
		v := s.Text()
		if v == "" {
			v = "(none)"
		}
		name := "--" + s.Name
		switch {
		case s.FileOnly:
			name = s.Name
		case len(s.Name) == 1:
			name = "-" + s.Name
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", name, report.OneLine(v), s.From)
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

// LogSettings logs settings in one record of l, msg "configuration", as
// spool consume does at start: the queue, the value of every setting
// under settings, and where each that is not a default came from under
// from, keys as the settings' names with _ for -.
func LogSettings(l *slog.Logger, queue string, settings []Setting) {
	var values, from []any
	for _, s := range settings {
		key := strings.ReplaceAll(s.Name, "-", "_")
		values = append(values, slog.Any(key, s.Value))
		if s.From != FromDefault {
			from = append(from, slog.String(key, s.From))
		}
	}
	l.Info("configuration", "queue", queue, slog.Group("settings", values...), slog.Group("from", from...))
}

// FormatText says a batch format in one value: its kind, then the keys
// spool.conf set beside it.
func FormatText(f batch.Format) string {
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
