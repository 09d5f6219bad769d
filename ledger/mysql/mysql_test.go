package mysql

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/testenv"
	"github.com/spoolq/spool/ledger"
	"github.com/spoolq/spool/ledger/ledgertest"
)

// envDSN names the environment variable holding the test server's URL.
const envDSN = "SPOOL_TEST_MYSQL"

// serverDSN returns the test server's mysql:// URL, skipping the test when
// there is none (failing on CI).
func serverDSN(t testing.TB) string {
	t.Helper()
	return testenv.Service(t, envDSN, "mysql://root@127.0.0.1:3306/test")
}

// freshDatabase creates an empty database for one test
// (ledgertest.Scratch) and returns the URL that names it; the database is
// dropped when the test ends.
func freshDatabase(t testing.TB) string {
	t.Helper()
	return ledgertest.Scratch(t, serverDSN(t))
}

func TestConformance(t *testing.T) {
	serverDSN(t)
	t.Parallel()
	ledgertest.Run(t, ledgertest.Backend{
		Fresh: func(t *testing.T) string { return freshDatabase(t) },
		// The keys and order_no are binary strings.
		ByteOrder: func(*testing.T, *ledger.DB) bool { return true },
	})
}

// TestIsConflict: the dialect's classification on the server's real
// errors. A deadlock and a lock wait timeout are conflicts, and the
// deadlock one to retry; a bad statement is neither.
func TestIsConflict(t *testing.T) {
	dsn := freshDatabase(t)
	t.Parallel()
	ctx := t.Context()
	l, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	db := l.SQL()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (k INT PRIMARY KEY, v INT) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (1, 0), (2, 0)"); err != nil {
		t.Fatal(err)
	}
	d := Dialect()
	// Lock wait timeout: a row held by another transaction.
	a, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Rollback() }()
	if _, err := a.ExecContext(ctx, "UPDATE t SET v = 1 WHERE k = 1"); err != nil {
		t.Fatal(err)
	}
	b, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Rollback() }()
	if _, err := b.ExecContext(ctx, "SET innodb_lock_wait_timeout = 1"); err != nil {
		t.Fatal(err)
	}
	_, err = b.ExecContext(ctx, "UPDATE t SET v = 2 WHERE k = 1")
	if err == nil || !d.IsConflict(err) || !d.Retry(err) {
		t.Errorf("lock wait timeout: IsConflict(%v) = %v, Retry = %v; want true, true", err, d.IsConflict(err), d.Retry(err))
	}
	// Deadlock: a holds 1 and wants 2, b holds 2 and wants 1.
	if _, err := b.ExecContext(ctx, "SET innodb_lock_wait_timeout = 20"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ExecContext(ctx, "UPDATE t SET v = 2 WHERE k = 2"); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	go func() { _, err := a.ExecContext(ctx, "UPDATE t SET v = 1 WHERE k = 2"); errs <- err }()
	time.Sleep(200 * time.Millisecond) // let a wait first; either order deadlocks
	go func() { _, err := b.ExecContext(ctx, "UPDATE t SET v = 2 WHERE k = 1"); errs <- err }()
	var deadlock error
	for range 2 {
		if err := <-errs; err != nil {
			deadlock = err
		}
	}
	if deadlock == nil || number(deadlock) != erLockDeadlock || !d.IsConflict(deadlock) || !d.Retry(deadlock) {
		t.Errorf("deadlock: %v (number %d), want error 1213, a conflict to retry", deadlock, number(deadlock))
	}
	_, err = db.ExecContext(ctx, "SELEKT 1")
	if err == nil || d.IsConflict(err) || d.Retry(err) {
		t.Errorf("syntax error: IsConflict(%v) = %v, want false", err, d.IsConflict(err))
	}
	if d.IsConflict(context.Canceled) || d.IsConflict(sql.ErrNoRows) || d.IsConflict(nil) {
		t.Error("IsConflict is true for an error that is not the server's")
	}
}

// TestBadDSN runs without a server: a DSN that is not a mysql:// URL with
// a user, a host and a database fails Open with ledger.ErrBadDSN (a
// configuration error), without echoing the password.
func TestBadDSN(t *testing.T) {
	for _, dsn := range []string{
		"mysql:/x",
		"mysql://spool:s3cret@db.internal:3306",
		"mysql://spool:s3cret@db.internal:notaport/queue",
		"mysql://spool:s3cret@db.internal:3306/",
		"mysql://spool:s3cret@db.internal:3306/a/b",
		"mysql://:s3cret@db.internal/queue",
		"mysql://spool:s3cret@db.internal/queue?timeout=forever",
		"mysql://spool:s3cret@db.internal:99999/queue",
	} {
		db, err := Open(t.Context(), dsn)
		if err == nil {
			db.Close()
			t.Errorf("Open(%q): nil error, want one", dsn)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open error %q shows the password", err)
		}
		if !errors.Is(err, ledger.ErrBadDSN) {
			t.Errorf("Open(%q) = %v, want ledger.ErrBadDSN", dsn, err)
		}
	}
}

// TestConfig: the URL's parts and parameters reach the driver, with the
// session settings the ledger needs.
func TestConfig(t *testing.T) {
	cfg, err := Config("mysql://spool:p%40ss@db.internal/queue?tls=skip-verify&timeout=3s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "spool" || cfg.Passwd != "p@ss" || cfg.Addr != "db.internal:3306" || cfg.DBName != "queue" ||
		cfg.Timeout != 3*time.Second || cfg.TLSConfig != "skip-verify" {
		t.Errorf("config %+v", cfg)
	}
	if cfg.Params["tx_isolation"] != "'READ-COMMITTED'" || !strings.Contains(cfg.Params["sql_mode"], "PIPES_AS_CONCAT") {
		t.Errorf("session params %v", cfg.Params)
	}
}

// TestServerCheck runs without a server: what check refuses.
func TestServerCheck(t *testing.T) {
	good := server{version: "10.11.19-MariaDB-0+deb12u1", flushAtTrx: 1, isolation: "READ-COMMITTED", sqlMode: "STRICT_TRANS_TABLES," + sqlMode}
	for _, tc := range []struct {
		name       string
		change     func(*server)
		wantErr    string
		notDurable bool
	}{
		{"defaults", func(*server) {}, "", false},
		{"MariaDB 10.5", func(s *server) { s.version = "10.5.2-MariaDB" }, "", false},
		{"MariaDB 11", func(s *server) { s.version = "11.4.2-MariaDB" }, "", false},
		{"MariaDB 10.4", func(s *server) { s.version = "10.4.30-MariaDB" }, "MariaDB 10.5 or later", false},
		{"MySQL", func(s *server) { s.version = "8.0.36" }, "is MySQL", false},
		{"flush 2", func(s *server) { s.flushAtTrx = 2 }, "innodb_flush_log_at_trx_commit is 2", true},
		{"flush 0", func(s *server) { s.flushAtTrx = 0 }, "innodb_flush_log_at_trx_commit is 0", true},
		{"repeatable read", func(s *server) { s.isolation = "REPEATABLE-READ" }, "READ-COMMITTED", false},
		{"sql_mode", func(s *server) { s.sqlMode = "ANSI_QUOTES" }, "lacks PIPES_AS_CONCAT", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.change(&s)
			err := s.check()
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("check = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("check = %v, want an error containing %q", err, tc.wantErr)
			}
			if got := errors.Is(err, ErrNotDurable); got != tc.notDurable {
				t.Errorf("errors.Is(%v, ErrNotDurable) = %v, want %v", err, got, tc.notDurable)
			}
		})
	}
}

// TestMissingDatabase: a URL naming no existing database fails Open
// clearly, without creating it.
func TestMissingDatabase(t *testing.T) {
	u, err := url.Parse(serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/spool_test_no_such_database"
	db, err := Open(t.Context(), u.String())
	if err == nil {
		db.Close()
		t.Fatal("Open: nil error, want one")
	}
	if !strings.Contains(err.Error(), `database "spool_test_no_such_database" does not exist`) || !errors.Is(err, ledger.ErrBadDSN) {
		t.Errorf("Open = %v, want ledger.ErrBadDSN naming the database", err)
	}
}
