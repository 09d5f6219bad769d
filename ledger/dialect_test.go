package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strconv"
	"strings"
	"testing"
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
		if got := PostgreSQL().Rebind(tc.in); got != tc.want {
			t.Errorf("Rebind(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := SQLite().Rebind(tc.in); got != tc.in {
			t.Errorf("SQLite Rebind(%q) = %q, want it unchanged", tc.in, got)
		}
	}
}

// TestMigrationsInStep: both engines have the same migrations, so a schema
// change cannot be made on one and forgotten on the other.
func TestMigrationsInStep(t *testing.T) {
	names := map[string][]string{}
	for _, d := range []Dialect{SQLite(), PostgreSQL()} {
		ms, err := loadMigrations(d.Migrations())
		if err != nil {
			t.Fatalf("%s: %v", d.Name(), err)
		}
		if len(ms) == 0 || ms[0].version != 1 {
			t.Fatalf("%s: migrations %+v, want the first to be version 1", d.Name(), ms)
		}
		for i, m := range ms {
			if m.version != int64(i+1) {
				t.Errorf("%s: migration %s has version %d, want %d (no gaps)", d.Name(), m.name, m.version, i+1)
			}
			names[d.Name()] = append(names[d.Name()], m.name)
		}
	}
	if !reflect.DeepEqual(names["sqlite"], names["postgres"]) {
		t.Errorf("migrations differ: sqlite %q, postgres %q", names["sqlite"], names["postgres"])
	}
	if _, err := fs.Stat(SQLite().Migrations(), "001_init.up.sql"); err != nil {
		t.Error(err)
	}
}

func TestOrderCheckSQLEmbedded(t *testing.T) {
	if !strings.Contains(OrderCheckSQL, "LAG(seq, 1, 0) OVER (PARTITION BY order_no ORDER BY seq)") {
		t.Error("OrderCheckSQL does not hold the query")
	}
	if strings.ContainsRune(OrderCheckSQL, '?') {
		t.Error("OrderCheckSQL has a placeholder; it must run as is in sqlite3 and psql")
	}
}

func TestPlaceholder(t *testing.T) {
	for _, c := range []struct {
		d    Dialect
		n    int
		want string
	}{
		{SQLite(), 1, "?1"}, {SQLite(), 12, "?12"},
		{PostgreSQL(), 1, "$1"}, {PostgreSQL(), 12, "$12"},
	} {
		if got := c.d.Placeholder(c.n); got != c.want {
			t.Errorf("%s Placeholder(%d) = %q, want %q", c.d.Name(), c.n, got, c.want)
		}
	}
}

type codedError int

func (e codedError) Error() string { return "sqlite error " + strconv.Itoa(int(e)) }
func (e codedError) Code() int     { return int(e) }

type stateError string

func (e stateError) Error() string    { return "postgres error " + string(e) }
func (e stateError) SQLState() string { return string(e) }

// TestIsConflict: each engine's conflicts, by the codes its drivers report
// (wrapped, as they reach a caller); the backends' tests check the drivers'
// real errors.
func TestIsConflict(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("sql statement 1 (line 1): %w", err) }
	for _, c := range []struct {
		d    Dialect
		err  error
		want bool
	}{
		{SQLite(), codedError(5), true},        // SQLITE_BUSY
		{SQLite(), codedError(6), true},        // SQLITE_LOCKED
		{SQLite(), codedError(5 | 2<<8), true}, // SQLITE_BUSY_SNAPSHOT
		{SQLite(), codedError(6 | 1<<8), true}, // SQLITE_LOCKED_SHAREDCACHE
		{SQLite(), codedError(19), false},      // SQLITE_CONSTRAINT
		{SQLite(), codedError(1), false},       // SQLITE_ERROR
		{SQLite(), stateError("40001"), false}, // another engine's
		{SQLite(), errors.New("plain"), false}, //
		{PostgreSQL(), stateError("40001"), true},
		{PostgreSQL(), stateError("40P01"), true},
		{PostgreSQL(), stateError("55P03"), true},
		{PostgreSQL(), stateError("57014"), true},
		{PostgreSQL(), stateError("23505"), false}, // unique_violation
		{PostgreSQL(), stateError("42P01"), false}, // undefined_table
		{PostgreSQL(), codedError(5), false},       // another engine's
		{PostgreSQL(), errors.New("plain"), false},
	} {
		if got := c.d.IsConflict(wrap(c.err)); got != c.want {
			t.Errorf("%s IsConflict(%v) = %v, want %v", c.d.Name(), c.err, got, c.want)
		}
	}
	if SQLite().IsConflict(nil) || PostgreSQL().IsConflict(nil) {
		t.Error("IsConflict(nil) = true")
	}
}
