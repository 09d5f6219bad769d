package postgres

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestRebindDollar(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"a = ? AND b = ?", "a = $1 AND b = $2"},
		{"VALUES (?, ?, ?)", "VALUES ($1, $2, $3)"},
		{"x = '?' AND y = ?", "x = '?' AND y = $1"},
		{"x = 'it''s ?' AND y = ?", "x = 'it''s ?' AND y = $1"},
		{`"odd?name" = ?`, `"odd?name" = $1`},
		{"a = ? -- why?\nAND b = ?", "a = $1 -- why?\nAND b = $2"},
		{"a - ? - ?", "a - $1 - $2"},
	} {
		if got := Dialect().Rebind(tc.in); got != tc.want {
			t.Errorf("Rebind(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPlaceholder(t *testing.T) {
	for n, want := range map[int]string{1: "$1", 12: "$12"} {
		if got := Dialect().Placeholder(n); got != want {
			t.Errorf("Placeholder(%d) = %q, want %q", n, got, want)
		}
	}
}

type stateError string

func (e stateError) Error() string    { return "postgres error " + string(e) }
func (e stateError) SQLState() string { return string(e) }

type codedError int

func (e codedError) Error() string { return fmt.Sprint("sqlite error ", int(e)) }
func (e codedError) Code() int     { return int(e) }

// TestIsConflictCodes: the conflicts by the SQLSTATEs the driver reports
// (wrapped, as they reach a caller); TestIsConflict checks the server's
// real errors.
func TestIsConflictCodes(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("sql statement 1 (line 1): %w", err) }
	for _, c := range []struct {
		err  error
		want bool
	}{
		{stateError("40001"), true},
		{stateError("40P01"), true},
		{stateError("55P03"), true},
		{stateError("57014"), true},
		{stateError("23505"), false}, // unique_violation
		{stateError("42P01"), false}, // undefined_table
		{codedError(5), false},       // another engine's
		{errors.New("plain"), false},
	} {
		if got := Dialect().IsConflict(wrap(c.err)); got != c.want {
			t.Errorf("IsConflict(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if Dialect().IsConflict(nil) {
		t.Error("IsConflict(nil) = true")
	}
}

// TestStatementTimeout: whole milliseconds, at least one, set for the
// transaction only.
func TestStatementTimeout(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Second:        "SET LOCAL statement_timeout = 30000",
		1500 * time.Microsecond: "SET LOCAL statement_timeout = 1",
		time.Microsecond:        "SET LOCAL statement_timeout = 1",
	} {
		set, reset, err := Dialect().StatementTimeout(d)
		if err != nil || set != want || !strings.HasPrefix(reset, "SET LOCAL statement_timeout") {
			t.Errorf("StatementTimeout(%v) = %q, %q, %v; want %q", d, set, reset, err, want)
		}
	}
}
