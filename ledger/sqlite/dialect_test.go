package sqlite

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestPlaceholder(t *testing.T) {
	for n, want := range map[int]string{1: "?1", 12: "?12"} {
		if got := Dialect().Placeholder(n); got != want {
			t.Errorf("Placeholder(%d) = %q, want %q", n, got, want)
		}
	}
	if q := "a = ? AND b = '?'"; Dialect().Rebind(q) != q {
		t.Errorf("Rebind(%q) = %q, want it unchanged", q, Dialect().Rebind(q))
	}
}

type codedError int

func (e codedError) Error() string { return fmt.Sprint("sqlite error ", int(e)) }
func (e codedError) Code() int     { return int(e) }

type stateError string

func (e stateError) Error() string    { return "postgres error " + string(e) }
func (e stateError) SQLState() string { return string(e) }

// TestIsConflictCodes: the conflicts by the result codes the driver
// reports (wrapped, as they reach a caller); TestIsConflict checks the
// driver's real errors.
func TestIsConflictCodes(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("sql statement 1 (line 1): %w", err) }
	for _, c := range []struct {
		err  error
		want bool
	}{
		{codedError(5), true},        // SQLITE_BUSY
		{codedError(6), true},        // SQLITE_LOCKED
		{codedError(5 | 2<<8), true}, // SQLITE_BUSY_SNAPSHOT
		{codedError(6 | 1<<8), true}, // SQLITE_LOCKED_SHAREDCACHE
		{codedError(19), false},      // SQLITE_CONSTRAINT
		{codedError(1), false},       // SQLITE_ERROR
		{stateError("40001"), false}, // another engine's
		{errors.New("plain"), false}, //
	} {
		if got := Dialect().IsConflict(wrap(c.err)); got != c.want {
			t.Errorf("IsConflict(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if Dialect().IsConflict(nil) {
		t.Error("IsConflict(nil) = true")
	}
}

// TestNoStatementTimeout: SQLite refuses a statement timeout, saying why.
func TestNoStatementTimeout(t *testing.T) {
	if _, _, err := Dialect().StatementTimeout(time.Second); err == nil {
		t.Error("StatementTimeout: nil error, want a refusal")
	}
}
