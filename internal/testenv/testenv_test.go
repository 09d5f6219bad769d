package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// fakeT records what a helper did to its test: Skip and Fatal end the
// caller's goroutine as the testing package's do.
type fakeT struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Skip(args ...any) {
	f.skipped, f.msg = true, args[0].(string)
	panic(f)
}
func (f *fakeT) Skipf(format string, args ...any) { f.Skip(fmt.Sprintf(format, args...)) }
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	panic(f)
}

// run calls fn with a fakeT and returns it once fn returned, skipped or
// failed.
func run(fn func(t testing.TB)) (f *fakeT) {
	f = &fakeT{}
	defer func() {
		if r := recover(); r != nil && r != any(f) {
			panic(r)
		}
	}()
	fn(f)
	return f
}

func TestLong(t *testing.T) {
	for _, c := range []struct {
		long, ci string
		skip     bool
	}{
		{"", "", true},
		{"0", "", true},
		{"1", "", false},
		{"", "true", false},
		{"0", "true", true},
		{"1", "false", false},
		{"", "false", true},
	} {
		t.Setenv(LongEnv, c.long)
		t.Setenv("CI", c.ci)
		f := run(func(t testing.TB) { Long(t, "a storm") })
		if f.skipped != c.skip || f.failed {
			t.Errorf("%s=%q CI=%q: skipped %v failed %v, want skipped %v", LongEnv, c.long, c.ci, f.skipped, f.failed, c.skip)
		}
		if f.skipped && (!strings.Contains(f.msg, LongEnv+"=1") || !strings.Contains(f.msg, "a storm")) {
			t.Errorf("skip message %q names neither the variable nor the test", f.msg)
		}
		if got := Pick(10, 1); got != map[bool]int{true: 1, false: 10}[c.skip] {
			t.Errorf("%s=%q CI=%q: Pick = %d", LongEnv, c.long, c.ci, got)
		}
	}
}

func TestService(t *testing.T) {
	t.Setenv(PostgresEnv, "")
	t.Setenv("CI", "")
	f := run(func(t testing.TB) { Postgres(t) })
	if !f.skipped || !strings.Contains(f.msg, PostgresEnv+"=") {
		t.Errorf("unset, not CI: skipped %v, message %q", f.skipped, f.msg)
	}
	t.Setenv("CI", "true")
	f = run(func(t testing.TB) { Postgres(t) })
	if !f.failed || !strings.Contains(f.msg, PostgresEnv) {
		t.Errorf("unset, CI: failed %v, message %q", f.failed, f.msg)
	}
	t.Setenv(PostgresEnv, "postgres://x")
	var got string
	f = run(func(t testing.TB) { got = Postgres(t) })
	if f.skipped || f.failed || got != "postgres://x" {
		t.Errorf("set: got %q, skipped %v failed %v", got, f.skipped, f.failed)
	}
}
