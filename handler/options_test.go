package handler

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// options returns valid defaults with the given options marked as set.
func options(given ...string) Options {
	return Options{
		ExecTimeout: DefaultExecTimeout, SQLTimeout: DefaultSQLTimeout, PostTimeout: DefaultPostTimeout,
		RetryBase: time.Second, RetryCap: time.Minute, RetryMax: 5, Concurrency: 1,
		Given: func(name string) bool { return slices.Contains(given, name) },
	}
}

func TestOptionsCheck(t *testing.T) {
	for _, c := range []struct {
		name    string
		set     func(o *Options)
		given   []string
		want    string // "" for none
		content bool
	}{
		{"none", func(*Options) {}, nil, "", false},
		{"two handlers", func(o *Options) { o.Exec, o.Post = "true", "http://x" }, []string{"exec", "post"}, "--exec and --post: choose one handler", false},
		{"empty exec", func(o *Options) { o.Exec = " " }, []string{"exec"}, "--exec is empty", false},
		{"timeout of another", func(o *Options) { o.Exec = "true" }, []string{"exec", "post-timeout"}, "--post-timeout needs --post", false},
		{"over the lease", func(o *Options) { o.Exec, o.ExecTimeout, o.Lease = "true", time.Minute, 30*time.Second }, []string{"exec"}, "want less than the claim lease, 30s", false},
		{"cap under base", func(o *Options) { o.RetryCap = time.Millisecond }, nil, "--retry-cap 1ms is shorter than --retry-base 1s", false},
		{"bad rate", func(o *Options) { o.Exec, o.Rate = "true", "0/s" }, []string{"exec", "rate"}, `--rate "0/s": want calls per second`, false},
		{"too many at once", func(o *Options) { o.Exec, o.Concurrency = "true", MaxConcurrency+1 }, []string{"exec", "concurrency"}, "--concurrency 1025: want 1 to 1024", false},
		{"no such program", func(o *Options) { o.Exec = "/nonexistent/prog" }, []string{"exec"}, `--exec "/nonexistent/prog"`, true},
		{"no sql file", func(o *Options) { o.SQLFile = "/nonexistent.sql" }, []string{"sql"}, "--sql: open /nonexistent.sql", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := options(c.given...)
			c.set(&o)
			err := o.Check()
			var oe *OptionError
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Check() = %v, want nil", err)
			case c.want == "":
			case !errors.As(err, &oe) || !strings.Contains(oe.Msg, c.want) || oe.Content != c.content:
				t.Fatalf("Check() = %#v, want an OptionError with %q, Content %v", err, c.want, c.content)
			}
		})
	}
	o := options("exec", "rate")
	o.Exec, o.Rate = "true", "50/s"
	if err := o.Check(); err != nil || o.PerSecond() != 50 || o.Kind() != "exec" {
		t.Errorf("Check() = %v, PerSecond %v, Kind %q; want nil, 50, exec", err, o.PerSecond(), o.Kind())
	}
}
