package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"

	driver "github.com/go-sql-driver/mysql"
)

// Scratch creates an empty database of its own on the server dsn names and
// returns dsn naming that database instead, and a func that drops it with
// all it holds (ledger.ScratchFunc). It is what the benchmarks and the
// tests use for a ledger no queue owns.
func Scratch(ctx context.Context, dsn string) (string, func(context.Context) error, error) {
	cfg, err := Config(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("scratch mysql ledger: %w", err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:]) // never returns an error
	name := "spool_scratch_" + hex.EncodeToString(rnd[:])
	u, err := url.Parse(dsn) // Config parsed it
	if err != nil {
		return "", nil, fmt.Errorf("scratch mysql ledger: %w", err)
	}
	u.Path = "/" + name
	cfg.DBName = ""
	conn, err := driver.NewConnector(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("scratch mysql ledger %s: %w", cfg.Addr, err)
	}
	db := sql.OpenDB(conn)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		_ = db.Close() // the error that matters is CREATE's
		return "", nil, fmt.Errorf("scratch mysql ledger %s: create database: %w", cfg.Addr, err)
	}
	drop := func(ctx context.Context) error {
		defer db.Close()
		if _, err := db.ExecContext(ctx, "DROP DATABASE "+name); err != nil {
			return fmt.Errorf("drop scratch database %s: %w", name, err)
		}
		return db.Close()
	}
	return u.String(), drop, nil
}
