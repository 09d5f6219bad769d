// Package testenv holds the switches every package's tests read from the
// environment, so that each is spelt, and skips, the same way everywhere:
// SPOOL_TEST_LONG for the long crash, soak and storm runs, and the
// addresses of the services some tests need.
//
// The rule is one for all of them: a developer's `go test ./...` skips what
// it cannot or should not run, with a message naming the variable that
// would run it; with CI=true (as .ci/run sets) nothing skips, and a missing
// service is a failure.
package testenv

import (
	"os"
	"testing"
)

// LongEnv names the variable that runs the long tests: SPOOL_TEST_LONG=1.
const LongEnv = "SPOOL_TEST_LONG"

// PostgresEnv names the variable holding a PostgreSQL server's DSN for the
// tests that need one.
const PostgresEnv = "SPOOL_TEST_POSTGRES"

// PostgresExample is a DSN for PostgresEnv, as the messages suggest it.
const PostgresExample = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// CI reports whether the tests run on CI (CI=true), where nothing may be
// skipped for want of a service, a tool or time.
func CI() bool { return os.Getenv("CI") == "true" }

// IsLong reports whether the long tests run: SPOOL_TEST_LONG is set to
// anything but "" or "0", or it is unset and CI is true. An explicit
// SPOOL_TEST_LONG=0 keeps the quick sizes even with CI=true (the services
// still required), for a quick run of what CI checks. Tests that keep a
// quick variant in the default run use it to pick their size.
func IsLong() bool {
	v, set := os.LookupEnv(LongEnv)
	if set && v != "" {
		return v != "0"
	}
	return CI()
}

// Long skips t unless the long tests run (IsLong), saying what it is and
// how to run it. Call it first in a test that takes more than about ten
// seconds alone; what it checks must also be checked, smaller, by a test
// that does run by default.
func Long(t testing.TB, what string) {
	t.Helper()
	if !IsLong() {
		t.Skipf("long test (%s): skipped unless %s=1 (.ci/run sets it)", what, LongEnv)
	}
}

// Pick returns long when the long tests run and quick otherwise: a size
// (messages, rounds, kills) for a test that runs in both.
func Pick[T any](long, quick T) T {
	if IsLong() {
		return long
	}
	return quick
}

// Missing skips t because something it needs is absent (a tool, a data
// set, a service), or fails it on CI, which must have everything. msg
// says what is missing and how to provide it.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if CI() {
		t.Fatalf("CI must provide it: %s", msg)
	}
	t.Skip(msg)
}

// Service returns the value of the environment variable env, the address
// of a service the test needs; when it is unset the test skips (fails on
// CI) with a message naming env and an example value.
func Service(t testing.TB, env, example string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		Missing(t, "skipped: set "+env+" to the server's address, e.g. "+env+"="+example)
	}
	return v
}

// Postgres returns the test PostgreSQL server's DSN from PostgresEnv, as
// Service does.
func Postgres(t testing.TB) string {
	t.Helper()
	return Service(t, PostgresEnv, PostgresExample)
}
