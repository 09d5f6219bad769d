package queueopen_test

import (
	"errors"
	"testing"
	"time"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/endpoint"
	"github.com/spoolq/spool/handler"
	"github.com/spoolq/spool/queueopen"
	"github.com/spoolq/spool/task"
)

// TestConsumeOptionsCheck: each rule of Check and CheckWork refuses with
// the flag's words, the zero options of the run pass (each zero is a
// default; the handler's are handler.Options' own), and
// of several mistakes the first in Check's order is reported.
func TestConsumeOptionsCheck(t *testing.T) {
	given := func(names ...string) func(string) bool {
		return func(n string) bool {
			for _, g := range names {
				if g == n {
					return true
				}
			}
			return false
		}
	}
	for _, c := range []struct {
		o    queueopen.ConsumeOptions
		work bool // CheckWork's rule
		want string
	}{
		{queueopen.ConsumeOptions{}, false, ""},
		{queueopen.ConsumeOptions{Workers: -1, BatchSize: -1}, false, "--workers -1: want 0 (default) or more"},
		{queueopen.ConsumeOptions{BatchSize: -1, Poll: -1}, false, "--batch -1: want 0 (default) or more"},
		{queueopen.ConsumeOptions{ShutdownTimeout: -time.Second}, false, "--shutdown-timeout -1s: want 0 (no bound) or a positive duration"},
		{queueopen.ConsumeOptions{Poll: time.Second}, false, "--poll 1s: want a positive interval, with --watch"},
		{queueopen.ConsumeOptions{Watch: true, Given: given("poll")}, false, "--poll 0s: want a positive interval, with --watch"},
		{queueopen.ConsumeOptions{Watch: true, Poll: time.Second}, false, ""},
		{queueopen.ConsumeOptions{MinAge: -1}, false, "--min-age -1ns: want 0 (off) or more"},
		{queueopen.ConsumeOptions{Lease: 2 * time.Second}, false, "--lease 2s: want 3s or more (it is renewed every third of it)"},
		{queueopen.ConsumeOptions{Given: given("lease")}, false, "--lease 0s: want 3s or more (it is renewed every third of it)"},
		{queueopen.ConsumeOptions{Lease: 3 * time.Second}, false, ""},
		{queueopen.ConsumeOptions{Given: given("auth")}, false, "--auth needs --listen: the API and the console are served at its address"},
		{queueopen.ConsumeOptions{Tokens: task.Tokens{}}, false, "--auth needs --listen"},
		{queueopen.ConsumeOptions{Tokens: task.Tokens{}, Listen: endpoint.ServeOptions{Addr: ":0"}}, false, ""},
		{queueopen.ConsumeOptions{Format: queueopen.FormatOverride{"format": []byte(`""`)}}, true, "--format: bad format: format is empty"},
		{queueopen.ConsumeOptions{Handler: handler.Options{Exec: "true", Post: "http://x/", Given: given("exec", "post")}}, true, "--exec"},
		{queueopen.ConsumeOptions{OnDeadLetter: " ", OnDeadLetterTimeout: time.Second, Given: given("on-dead-letter")}, true, "--on-dead-letter is empty"},
		{queueopen.ConsumeOptions{OnDeadLetter: "true"}, true, "--on-dead-letter-timeout 0s: want a positive duration"},
		{queueopen.ConsumeOptions{Given: given("on-dead-letter-timeout")}, true, "--on-dead-letter-timeout 0s: want a positive duration"},
		{queueopen.ConsumeOptions{OnDeadLetter: "true", OnDeadLetterTimeout: time.Second}, true, ""},
	} {
		o := c.o
		// The handler's options as the command line's defaults give them:
		// handler.Options has no zero default.
		h := handler.Options{Exec: o.Handler.Exec, Post: o.Handler.Post, Given: o.Handler.Given,
			ExecTimeout: handler.DefaultExecTimeout, SQLTimeout: handler.DefaultSQLTimeout, PostTimeout: handler.DefaultPostTimeout,
			Concurrency: spool.DefaultConcurrency, PauseAfter: spool.DefaultPauseAfter, RetryBase: spool.DefaultRetryBase,
			RetryCap: spool.DefaultRetryCap, RetryMax: spool.DefaultRetryMaxAttempts, RetryJitter: true}
		if h.Given == nil {
			h.Given = given()
		}
		o.Handler = h
		err := o.Check()
		if c.work {
			if err != nil {
				t.Fatalf("%+v: Check: %v, want nil", c.o, err)
			}
			err = o.CheckWork()
		} else if err == nil {
			err = o.CheckWork()
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v, want nil", c.o, err)
		case c.want != "" && (err == nil || len(err.Error()) < len(c.want) || err.Error()[:len(c.want)] != c.want):
			t.Errorf("%+v: %v, want one starting %q", c.o, err, c.want)
		}
		var oe *handler.OptionError
		var fe *queueopen.FormatFlagError
		if err != nil && !errors.As(err, &oe) && !errors.As(err, &fe) {
			t.Errorf("%+v: %T, want a *handler.OptionError or *FormatFlagError", c.o, err)
		}
	}
}
