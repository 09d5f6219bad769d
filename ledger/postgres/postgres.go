// Package postgres is the scale-out ledger backend: one PostgreSQL database
// shared by the consumers of every host that mounts the queue directory. It
// uses pgx through database/sql (driver "pgx"), so the shared queries of
// package ledger run unchanged.
//
// The DSN is either a URL or a keyword/value string, as libpq takes them:
//
//	postgres://spool@db.internal:5432/queue?sslmode=verify-full
//	host=db.internal port=5432 user=spool dbname=queue sslmode=verify-full
//
// Any other parameter is sent to the server as a session setting. The one
// spool cares about is search_path: the ledger's tables are created in, and
// read from, its first schema, so several ledgers (or tests) can share one
// database with a schema each (`?search_path=orders` or
// `search_path=orders`). The schema must exist; Open does not create it.
// Other settings go in options, as with libpq; in a URL, percent-encode it
// (a space is %20, not '+'): `?options=-c%20lock_timeout%3D10s`.
//
// The ledger prepares statements on its connections, so connect to the
// server directly or through a pooler in session mode, not transaction mode.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/spoolq/spool/ledger"
)

// ErrNotDurable is wrapped by Open, and by any later use that opens a new
// connection, when the server would acknowledge a commit before it is on
// disk: synchronous_commit=off, or fsync=off. I3 moves a file to done/ only
// once its row is committed durably, so the ledger refuses to run rather
// than risk a file in done/ whose row a crash took back.
var ErrNotDurable = errors.New("commits are not durable")

// maxConns is the size of the connection pool. A consumer commits one batch
// at a time, so one connection carries the write transaction and the others
// serve what may run beside it (ClaimOutcome during recovery, the retry
// schedule, a report). More would not make commits
// faster, since batching already groups them, but each connection is a
// server process, and max_connections (100 by default) is shared by every
// consumer on every host.
const maxConns = 4

// maxIdleTime closes a connection unused for this long: a consumer in
// --watch mode may sit idle for hours, and need not hold server processes,
// or connections a firewall has silently dropped, all that time.
const maxIdleTime = 5 * time.Minute

// defaultConnectTimeout bounds connecting when the DSN sets no
// connect_timeout, so an unreachable server fails Open with an error rather
// than hanging a consumer that was given no deadline.
const defaultConnectTimeout = 10 * time.Second

// minServerVersion is the oldest PostgreSQL the ledger's dialect supports
// (Dialect), as server_version_num.
const minServerVersion = 150000

// Open connects to the PostgreSQL database dsn names, checks that it
// commits durably, and brings the ledger's schema up to date. It fails with
// ErrNotDurable when synchronous_commit or fsync is off, with
// ledger.ErrBadDSN when dsn cannot be parsed or names a database or a
// search_path schema the server does not have, and with a plain error when
// the server is older than PostgreSQL 15. The ledger's pool holds at most
// four connections.
func Open(ctx context.Context, dsn string) (*ledger.DB, error) {
	return OpenWith(ctx, dsn, Options{})
}

// Options tune OpenWith. The zero value is Open's behaviour.
type Options struct {
	// MustExist refuses a schema that holds no ledger yet
	// (ledger.ErrNoLedger) instead of creating the tables: for reports.
	MustExist bool
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, dsn string, o Options) (*ledger.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx redacts the password from its parse errors.
		return nil, fmt.Errorf("open postgres ledger: %w: %w", ledger.ErrBadDSN, err)
	}
	if namesNoDatabase(dsn) {
		// pgx would connect to the database named like the user: a
		// ledger created in "postgres", beside whatever else lives there.
		return nil, fmt.Errorf("open postgres ledger: %w: DSN names no database. Try: postgres://USER@HOST[:PORT]/DB", ledger.ErrBadDSN)
	}
	where := fmt.Sprintf("postgres ledger %s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
	db, err := open(ctx, cfg)
	if err != nil {
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) {
			switch pgErr.Code {
			case "3D000": // invalid_catalog_name
				return nil, fmt.Errorf("open %s: %w: database %q does not exist on the server. Try: CREATE DATABASE %s, or fix the DSN",
					where, ledger.ErrBadDSN, cfg.Database, cfg.Database)
			case "42704": // undefined_object: a session setting of the DSN the server does not know
				return nil, fmt.Errorf("open %s: %w: the server refuses a parameter of the DSN: %s", where, ledger.ErrBadDSN, pgErr.Message)
			}
		}
		return nil, fmt.Errorf("open %s: %w", where, err)
	}
	l, err := ledger.New(ctx, db, Dialect(), ledger.Options{MustExist: o.MustExist})
	if err != nil {
		_ = db.Close() // the error that matters is New's
		return nil, fmt.Errorf("open %s: %w", where, err)
	}
	return l, nil
}

// namesNoDatabase reports whether dsn, a URL or a keyword/value string,
// leaves the database unnamed (and PGDATABASE is unset), so that the
// server's default, the user's name, would be taken.
func namesNoDatabase(dsn string) bool {
	if os.Getenv("PGDATABASE") != "" {
		return false
	}
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return strings.Trim(u.Path, "/") == "" && u.Query().Get("dbname") == ""
	}
	return !strings.Contains(dsn, "dbname=")
}

// open returns a pool on cfg whose every connection has passed check, after
// opening one to report a refusal now rather than at the first commit.
func open(ctx context.Context, cfg *pgx.ConnConfig) (*sql.DB, error) {
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	if cfg.RuntimeParams["application_name"] == "" {
		// Names spool's sessions in pg_stat_activity and the server log.
		cfg.RuntimeParams["application_name"] = "spool"
	}
	// Checked on every new connection, not once: a connection opened later
	// (after one was closed as idle, or on a failover) is as much a part of
	// I3 as the first.
	db := stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(func(ctx context.Context, conn *pgx.Conn) error {
		if err := check(ctx, conn); err != nil {
			// stdlib does not close a connection its AfterConnect refused.
			_ = conn.Close(ctx) // the error that matters is check's
			return err
		}
		return nil
	}))
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(maxIdleTime)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close() // the error that matters is the ping's
		return nil, err
	}
	return db, nil
}

// settings are what check reads from a new session.
type settings struct {
	synchronousCommit string // SHOW synchronous_commit
	fsync             string // SHOW fsync
	version           int    // server_version_num
	schema            string // current_schema(); empty when search_path names none that exists
	searchPath        string // SHOW search_path
}

// check reads the session's settings and refuses those the ledger cannot
// run with.
func check(ctx context.Context, conn *pgx.Conn) error {
	var (
		s       settings
		version string
		schema  *string
	)
	// current_setting(name) is SHOW name, in one round trip for all.
	err := conn.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), current_setting('fsync'),
    current_setting('server_version_num'), current_schema(), current_setting('search_path')`).
		Scan(&s.synchronousCommit, &s.fsync, &version, &schema, &s.searchPath)
	if err != nil {
		return fmt.Errorf("read server settings: %w", err)
	}
	if s.version, err = strconv.Atoi(version); err != nil {
		return fmt.Errorf("read server settings: server_version_num %q: %w", version, err)
	}
	if schema != nil {
		s.schema = *schema
	}
	return s.check()
}

func (s settings) check() error {
	// Every other value (on, local, remote_write, remote_apply) waits at
	// least for the local WAL flush before the commit returns.
	if s.synchronousCommit == "off" {
		return fmt.Errorf("%w: synchronous_commit is off, so a commit may return before it is on disk (I3). "+
			"Try: remove synchronous_commit from the DSN's options, or ALTER ROLE ... SET synchronous_commit = on", ErrNotDurable)
	}
	if s.fsync == "off" {
		return fmt.Errorf("%w: the server runs with fsync off, so a crash may lose committed rows (I3). "+
			"Try: set fsync = on in postgresql.conf", ErrNotDurable)
	}
	if s.version < minServerVersion {
		return fmt.Errorf("server_version_num is %d: the ledger needs PostgreSQL 15 or later", s.version)
	}
	if s.schema == "" {
		return fmt.Errorf("%w: search_path %q names no existing schema to hold the ledger. "+
			"Try: CREATE SCHEMA, or fix search_path in the DSN", ledger.ErrBadDSN, s.searchPath)
	}
	return nil
}
