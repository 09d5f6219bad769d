package bench

import (
	"strings"
	"testing"
)

// The option checks refuse what cannot be measured, naming the flag.
func TestOptionChecks(t *testing.T) {
	none := func(string) bool { return false }
	plain := Options{N: 10, Rounds: 1}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"plain", plain.Check(), ""},
		{"no messages", Options{N: 0, Rounds: 1}.Check(), "want --n >= 1"},
		{"format", Options{N: 1, Rounds: 1, Format: "xml"}.Check(), `--format "xml"`},
		{"calls", (&CallOptions{Handler: "post", Latency: 1, Concurrency: 1, Procs: 1}).Check(plain), ""},
		{"calls without handler", (&CallOptions{Latency: 1, Concurrency: 1, Procs: 1}).Check(plain), "add --handler post"},
		{"calls rounds", (&CallOptions{Handler: "exec", Latency: 1, Concurrency: 1, Procs: 1}).Check(Options{N: 1, Rounds: 2}), "no --floor, --rounds"},
		{"watch poll", (&WatchOptions{Idle: 1, Gap: 1, Steady: 1, Trickle: 1, Rate: 1, Poll: -1}).Check(plain, none), "--poll -1ns"},
		{"watch handler", (&WatchOptions{}).Check(plain, func(f string) bool { return f == "handler" }), "--handler is not for --watch"},
		{"relay scheme", (&RelayOptions{Targets: []string{"http://x"}, Aggregates: 1}).Check(none), "--relay http://x: want nats://"},
	} {
		switch {
		case c.want == "" && c.err != nil:
			t.Errorf("%s: %v, want none", c.name, c.err)
		case c.want != "" && (c.err == nil || !strings.Contains(c.err.Error(), c.want)):
			t.Errorf("%s: %v, want one with %q", c.name, c.err, c.want)
		}
	}
	ro := RelayOptions{Targets: []string{"nats://x"}, Aggregates: 1, N: 10}
	if err := ro.Check(none); err != nil || ro.N != 5000 {
		t.Errorf("relay without --n: %v, N %d; want nil, 5000", err, ro.N)
	}
}
