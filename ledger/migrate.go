package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"
)

// migration is one NNN_name.up.sql file of a dialect.
type migration struct {
	version int64
	name    string
	sql     string
}

// loadMigrations reads a dialect's migration files in version order.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".up.sql")
		if !ok || e.IsDir() {
			continue
		}
		num, _, _ := strings.Cut(name, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: name must start with a version number >= 1", e.Name())
		}
		text, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(text)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return cmp.Compare(a.version, b.version) })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", ms[i-1].name, ms[i].name, ms[i].version)
		}
	}
	return ms, nil
}

func migrate(ctx context.Context, sqlDB *sql.DB, d Dialect) error {
	ms, err := loadMigrations(d.Migrations())
	if err != nil {
		return err
	}
	// Most opens find the schema current. Check that with a read first: the
	// migration transaction takes the write lock, and on SQLite every report
	// and consumer opening the ledger would otherwise queue behind a
	// consumer's long transaction (a slow handler) just to learn nothing
	// needs doing.
	if current, err := upToDate(ctx, sqlDB, ms); err == nil && current {
		return nil
	}
	tx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// After Commit, Rollback is a no-op returning sql.ErrTxDone; before it,
	// the error that matters is the one being returned.
	defer func() { _ = tx.Rollback() }()
	if lock := d.MigrationLock(); lock != "" {
		if _, err := tx.ExecContext(ctx, lock); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    BIGINT NOT NULL PRIMARY KEY,
    name       TEXT   NOT NULL,
    applied_at TEXT   NOT NULL
)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	applied := map[int64]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	insert := d.Rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`)
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("apply %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, insert, m.version, m.name, formatTime(time.Now())); err != nil {
			return fmt.Errorf("apply %s: %w", m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// upToDate reports whether every migration is recorded as applied, with a
// read-only query; an error (no schema_migrations table yet) means no.
func upToDate(ctx context.Context, sqlDB *sql.DB, ms []migration) (bool, error) {
	var n int64
	var maxVersion sql.NullInt64
	err := sqlDB.QueryRowContext(ctx, `SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &maxVersion)
	if err != nil {
		return false, err
	}
	return len(ms) > 0 && n == int64(len(ms)) && maxVersion.Valid && maxVersion.Int64 == ms[len(ms)-1].version, nil
}
