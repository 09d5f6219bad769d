package postgres

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// The dialect finds PostgreSQL's SQLSTATE through this method; a driver
// upgrade that dropped it would make every conflict look permanent.
var _ interface{ SQLState() string } = (*pgconn.PgError)(nil)

// TestIsConflict: the dialect's classification on the server's real
// errors. Waits that time out are conflicts; a bad statement is not.
func TestIsConflict(t *testing.T) {
	dsn := freshSchema(t)
	t.Parallel()
	ctx := t.Context()
	db := admin(t, dsn)
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatal(err)
	}
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	if _, err := holder.ExecContext(ctx, "LOCK TABLE t"); err != nil {
		t.Fatal(err)
	}
	d := Dialect()
	inTx := func(stmts ...string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return err
			}
		}
		return nil
	}
	for _, c := range []struct {
		name  string
		stmts []string
		want  bool
	}{
		{"lock_timeout", []string{"SET LOCAL lock_timeout = '20ms'", "LOCK TABLE t"}, true},
		{"statement_timeout", []string{"SET LOCAL statement_timeout = '20ms'", "SELECT pg_sleep(5)"}, true},
		{"syntax error", []string{"SELEKT 1"}, false},
		{"missing table", []string{"SELECT * FROM no_such_table"}, false},
	} {
		err := inTx(c.stmts...)
		if err == nil {
			t.Errorf("%s: succeeded", c.name)
			continue
		}
		if got := d.IsConflict(err); got != c.want {
			t.Errorf("%s: IsConflict(%v) = %v, want %v", c.name, err, got, c.want)
		}
	}
	if d.IsConflict(context.Canceled) || d.IsConflict(sql.ErrNoRows) {
		t.Error("IsConflict is true for an error that is not the server's")
	}
}
