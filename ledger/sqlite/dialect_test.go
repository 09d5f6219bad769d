package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/spoolq/spool/ledger"
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

// TestIsMissingTable: SQLite's "no such table" is a missing table; its
// other errors, an I/O error of a full disk among them, are not, so that
// a ledger that cannot be read is not reported as no ledger.
func TestIsMissingTable(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, missing := db.Exec("SELECT * FROM schema_migrations")
	_, syntax := db.Exec("SELEC 1")
	d := Dialect().(ledger.MissingTable)
	if missing == nil || !d.IsMissingTable(missing) {
		t.Errorf("IsMissingTable(%v) = false, want true", missing)
	}
	for _, err := range []error{syntax, codedErr{4874}, codedErr{13}, errors.New("no such table: x")} {
		if d.IsMissingTable(err) {
			t.Errorf("IsMissingTable(%v) = true, want false", err)
		}
	}
}

// codedErr is an error with an SQLite result code, as modernc's are.
type codedErr struct{ code int }

func (e codedErr) Error() string { return fmt.Sprintf("sqlite error (%d)", e.code) }
func (e codedErr) Code() int     { return e.code }
