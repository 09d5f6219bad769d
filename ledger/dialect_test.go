package ledger

import (
	"io/fs"
	"reflect"
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

func TestPlaceholder(t *testing.T) {
	for _, tc := range []struct {
		d    Dialect
		n    int
		want string
	}{
		{SQLite(), 1, "?1"}, {SQLite(), 12, "?12"},
		{PostgreSQL(), 1, "$1"}, {PostgreSQL(), 12, "$12"},
	} {
		if got := tc.d.Placeholder(tc.n); got != tc.want {
			t.Errorf("%s Placeholder(%d) = %q, want %q", tc.d.Name(), tc.n, got, tc.want)
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
