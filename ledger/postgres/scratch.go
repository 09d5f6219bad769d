package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/spoolq/spool/ledger"
)

// Scratch creates an empty schema of its own on the database dsn names
// and returns dsn with its search_path set to that schema, and a func that
// drops the schema with all it holds (ledger.ScratchFunc). It is what the
// benchmarks and the tests use for a ledger no queue owns.
func Scratch(ctx context.Context, dsn string) (string, func(context.Context) error, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("scratch postgres ledger: %w: %w", ledger.ErrBadDSN, err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:]) // never returns an error
	schema := "spool_scratch_" + hex.EncodeToString(rnd[:])
	scratch, err := withSearchPath(dsn, schema)
	if err != nil {
		return "", nil, fmt.Errorf("scratch postgres ledger: %w: %w", ledger.ErrBadDSN, err)
	}
	db := stdlib.OpenDB(*cfg)
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		_ = db.Close() // the error that matters is CREATE's
		return "", nil, fmt.Errorf("scratch postgres ledger %s:%d/%s: create schema: %w", cfg.Host, cfg.Port, cfg.Database, err)
	}
	drop := func(ctx context.Context) error {
		defer db.Close()
		if _, err := db.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			return fmt.Errorf("drop scratch schema %s: %w", schema, err)
		}
		return db.Close()
	}
	return scratch, drop, nil
}

// withSearchPath returns dsn, a URL or a keyword/value string, with its
// search_path set to schema (a plain identifier).
func withSearchPath(dsn, schema string) (string, error) {
	if !strings.HasPrefix(dsn, Scheme+"://") && !strings.HasPrefix(dsn, "postgresql://") {
		// Keyword/value: a later keyword overrides an earlier one.
		return dsn + " search_path=" + schema, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("DSN is not a URL") // url's errors quote the password
	}
	v := u.Query()
	v.Set("search_path", schema)
	u.RawQuery = v.Encode()
	return u.String(), nil
}
