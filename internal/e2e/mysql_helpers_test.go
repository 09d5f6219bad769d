//go:build linux

package e2e

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool/internal/testenv"
	"github.com/spoolq/spool/ledger/mysql"
)

// envMySQL names the environment variable holding a MariaDB server's URL,
// as for the ledger backend's own tests.
const envMySQL = "SPOOL_TEST_MYSQL"

// mysqlDatabase creates a database of the test's own on the MariaDB server
// of SPOOL_TEST_MYSQL (skipping the test without one, failing on CI), and
// returns the mysql:// URL that names it and a connection to it. The
// database is dropped when the test ends.
func mysqlDatabase(t *testing.T) (string, *sql.DB) {
	t.Helper()
	server := testenv.Service(t, envMySQL, "mysql://root@127.0.0.1:3306/test")
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	name := "spool_e2e_" + hex.EncodeToString(rnd[:])
	connect := func(db string) *sql.DB {
		cfg, err := mysql.Config(server)
		if err != nil {
			t.Fatalf("%s: %v", envMySQL, err)
		}
		cfg.DBName = db
		c, err := driver.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return sql.OpenDB(c)
	}
	root := connect("")
	if _, err := root.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	db := connect(name)
	t.Cleanup(func() {
		db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := root.ExecContext(ctx, "DROP DATABASE "+name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
		root.Close()
	})
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String(), db
}
