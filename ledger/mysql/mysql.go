// Package mysql is the ledger backend on MariaDB: one database shared by the
// consumers of every host that mounts the queue directory, as with
// PostgreSQL, for sites that run MariaDB already. It uses
// github.com/go-sql-driver/mysql through database/sql, so the shared
// queries of package ledger run unchanged, their conflict clauses
// completed by the Dialect.
//
// The DSN is a URL:
//
//	mysql://spool:secret@db.internal:3306/queue
//	mysql://spool@db.internal/queue?tls=true
//
// The port defaults to 3306; the parameters are the driver's (tls,
// timeout, ...). The database must exist; Open does not create it.
//
// The server must be MariaDB 10.5 or later: the ledger needs INSERT ...
// RETURNING, which MySQL lacks. Open refuses MySQL, an older MariaDB, and a
// server that does not flush its log at every commit
// (innodb_flush_log_at_trx_commit other than 1). Every session runs at
// READ COMMITTED, so that each statement reads what was committed before
// it (a reservation met by Reserve is then seen settled, as on
// PostgreSQL; at REPEATABLE READ the transaction's first snapshot would
// hide it), and with sql_mode ANSI_QUOTES, PIPES_AS_CONCAT,
// STRICT_ALL_TABLES, NO_BACKSLASH_ESCAPES and NO_ENGINE_SUBSTITUTION, so
// that the shared SQL means what it means on the other engines. A --sql
// handler's statements run in that mode too.
package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool/ledger"
)

// ErrNotDurable is wrapped by Open when the server would acknowledge a
// commit before it is on disk (innodb_flush_log_at_trx_commit other than
// 1): I3 moves a file to done/ only once its row is committed durably.
var ErrNotDurable = errors.New("commits are not durable")

// maxConns, maxIdleTime and defaultConnectTimeout are as for PostgreSQL
// (see ledger/postgres): a few connections, closed when idle, and a
// bounded connect.
const (
	maxConns              = 4
	maxIdleTime           = 5 * time.Minute
	defaultConnectTimeout = 10 * time.Second
	// migrationLockWait bounds the wait for another process's migration.
	migrationLockWait = 60
)

// sqlMode is every session's sql_mode; see the package comment.
const sqlMode = "ANSI_QUOTES,PIPES_AS_CONCAT,STRICT_ALL_TABLES,NO_BACKSLASH_ESCAPES,NO_ENGINE_SUBSTITUTION"

// Options tune OpenWith. The zero value is Open's behaviour.
type Options struct {
	// MustExist refuses a database that holds no ledger yet
	// (ledger.ErrNoLedger) instead of creating the tables: for reports.
	MustExist bool
	// ReadOnly refuses a ledger whose schema is not up to date instead of
	// migrating it, for a reader that may not write (ledger.Options).
	ReadOnly bool
}

// Open connects to the MariaDB database dsn names, checks the server, and
// brings the ledger's schema up to date.
func Open(ctx context.Context, dsn string) (*ledger.DB, error) {
	return OpenWith(ctx, dsn, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, dsn string, o Options) (*ledger.DB, error) {
	cfg, err := Config(dsn)
	if err != nil {
		return nil, fmt.Errorf("open mysql ledger: %w", err)
	}
	where := fmt.Sprintf("mysql ledger %s/%s", cfg.Addr, cfg.DBName)
	db, err := open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", where, err)
	}
	l, err := newLedger(ctx, db, cfg.DBName, o)
	if err != nil {
		_ = db.Close() // the error that matters is New's
		return nil, fmt.Errorf("open %s: %w", where, err)
	}
	return l, nil
}

// Config parses a mysql:// URL into the driver's configuration, with the
// session settings the ledger needs. The error never shows the password.
func Config(dsn string) (*driver.Config, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		// url's errors quote the whole URL, password included.
		return nil, fmt.Errorf("%w: DSN is not a mysql://USER[:PASS]@HOST[:PORT]/DB URL", ledger.ErrBadDSN)
	}
	if u.Scheme != Scheme || u.Host == "" || u.User == nil || u.User.Username() == "" {
		return nil, fmt.Errorf("%w: DSN %s: want mysql://USER[:PASS]@HOST[:PORT]/DB", ledger.ErrBadDSN, u.Redacted())
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return nil, fmt.Errorf("%w: DSN %s: want one database name after the host (mysql://USER[:PASS]@HOST[:PORT]/DB)", ledger.ErrBadDSN, u.Redacted())
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "3306"
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("%w: DSN %s: port %q is not a number from 1 to 65535", ledger.ErrBadDSN, u.Redacted(), port)
	}
	cfg := driver.NewConfig()
	if u.RawQuery != "" {
		// The driver's own parameters (tls, timeout, ...), parsed by it.
		parsed, err := driver.ParseDSN("/?" + u.RawQuery)
		if err != nil {
			return nil, fmt.Errorf("%w: DSN %s: %w", ledger.ErrBadDSN, u.Redacted(), err)
		}
		cfg = parsed
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", net.JoinHostPort(host, port), db
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultConnectTimeout
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["sql_mode"] = "'" + sqlMode + "'"
	cfg.Params["tx_isolation"] = "'READ-COMMITTED'"
	cfg.Collation = "utf8mb4_bin"
	// Not the driver's default, which writes to stderr: SetLogger's.
	cfg.Logger = driverLogger{}
	// The migrations are files of several statements.
	cfg.MultiStatements = true
	cfg.InterpolateParams = false
	cfg.ClientFoundRows = false // RowsAffected counts rows changed
	return cfg, nil
}

// open returns a pool on cfg, after checking the server on one connection.
func open(ctx context.Context, cfg *driver.Config) (*sql.DB, error) {
	conn, err := driver.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(maxIdleTime)
	if err := check(ctx, db, cfg.DBName); err != nil {
		_ = db.Close() // the error that matters is check's
		return nil, err
	}
	return db, nil
}

// server is what check reads from a session.
type server struct {
	version    string // @@version, "10.11.19-MariaDB-0+deb12u1"
	flushAtTrx int    // @@innodb_flush_log_at_trx_commit
	isolation  string // @@tx_isolation
	sqlMode    string // @@sql_mode
}

// check reads the session's settings and refuses those the ledger cannot
// run with.
func check(ctx context.Context, db *sql.DB, name string) error {
	var s server
	err := db.QueryRowContext(ctx, `SELECT @@version, @@innodb_flush_log_at_trx_commit, @@tx_isolation, @@sql_mode`).
		Scan(&s.version, &s.flushAtTrx, &s.isolation, &s.sqlMode)
	if err != nil {
		switch number(err) {
		case 1049: // ER_BAD_DB_ERROR
			return fmt.Errorf("%w: database %q does not exist on the server. Try: CREATE DATABASE %s, or fix the DSN", ledger.ErrBadDSN, name, name)
		case 1193: // ER_UNKNOWN_SYSTEM_VARIABLE: a URL parameter neither the driver nor the server knows
			return fmt.Errorf("%w: a parameter of the DSN is neither a driver option nor a server variable: %w", ledger.ErrBadDSN, err)
		}
		return fmt.Errorf("read server settings: %w", err)
	}
	return s.check()
}

func (s server) check() error {
	if !strings.Contains(s.version, "MariaDB") {
		return fmt.Errorf("server %s is MySQL: the ledger needs MariaDB 10.5 or later (INSERT ... RETURNING)", s.version)
	}
	if major, minor, ok := versionOf(s.version); !ok || major < 10 || (major == 10 && minor < 5) {
		return fmt.Errorf("server version %s: the ledger needs MariaDB 10.5 or later (INSERT ... RETURNING)", s.version)
	}
	if s.flushAtTrx != 1 {
		return fmt.Errorf("%w: innodb_flush_log_at_trx_commit is %d, so a commit may return before it is on disk (I3). "+
			"Try: set innodb_flush_log_at_trx_commit = 1 on the server", ErrNotDurable, s.flushAtTrx)
	}
	if s.isolation != "READ-COMMITTED" {
		return fmt.Errorf("session isolation is %s, want READ-COMMITTED", s.isolation)
	}
	for _, m := range strings.Split(sqlMode, ",") {
		if !strings.Contains(","+s.sqlMode+",", ","+m+",") {
			return fmt.Errorf("session sql_mode %q lacks %s", s.sqlMode, m)
		}
	}
	return nil
}

// versionOf reads the major and minor numbers at the start of version.
func versionOf(version string) (major, minor int, ok bool) {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}

// newLedger brings the schema up to date under a named lock: DDL commits
// by itself on MariaDB, so the migration transaction cannot hold one (see
// Dialect's MigrationLock), and processes opening a new database at once
// must take turns. GET_LOCK's lock belongs to the session, so it is taken
// and released on a connection of its own.
func newLedger(ctx context.Context, db *sql.DB, name string, o Options) (*ledger.DB, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close() // closing the session would release the lock too
	lock := "spool:migrate:" + name
	if len(lock) > 64 { // GET_LOCK's limit
		lock = lock[:64]
	}
	var got sql.NullInt64
	if err := c.QueryRowContext(ctx, `SELECT GET_LOCK(?, ?)`, lock, migrationLockWait).Scan(&got); err != nil {
		return nil, fmt.Errorf("lock for migration: %w", err)
	}
	if got.Int64 != 1 {
		return nil, fmt.Errorf("lock for migration: another process held %q for %d s", lock, migrationLockWait)
	}
	l, err := ledger.New(ctx, db, Dialect(), ledger.Options{MustExist: o.MustExist, ReadOnly: o.ReadOnly})
	var released sql.NullInt64
	if rerr := c.QueryRowContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK(?)`, lock).Scan(&released); rerr != nil && err == nil {
		// The session's end releases it anyway; say so only if all else
		// went well.
		_ = l.Close()
		return nil, fmt.Errorf("release migration lock: %w", rerr)
	}
	return l, err
}
