//go:build linux

package e2e

import (
	"database/sql"
	"testing"

	driver "github.com/go-sql-driver/mysql"

	"github.com/spoolq/spool/internal/testenv"
	"github.com/spoolq/spool/ledger/ledgertest"
	"github.com/spoolq/spool/ledger/mysql"
)

// envMySQL names the environment variable holding a MariaDB server's URL,
// as for the ledger backend's own tests.
const envMySQL = "SPOOL_TEST_MYSQL"

// mysqlDatabase creates a database of the test's own on the MariaDB server
// of SPOOL_TEST_MYSQL (skipping the test without one, failing on CI;
// ledgertest.Scratch), and returns the mysql:// URL that names it and a
// connection to it. The database is dropped when the test ends.
func mysqlDatabase(t *testing.T) (string, *sql.DB) {
	t.Helper()
	dsn := ledgertest.Scratch(t, testenv.Service(t, envMySQL, "mysql://root@127.0.0.1:3306/test"))
	cfg, err := mysql.Config(dsn)
	if err != nil {
		t.Fatalf("%s: %v", envMySQL, err)
	}
	c, err := driver.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	// Registered after Scratch's drop, so run before it.
	t.Cleanup(func() { db.Close() })
	return dsn, db
}
